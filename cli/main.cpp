// wick: command-line front end. One file per subcommand (cmd_*.cpp); each parses its flags and
// calls the library. Results go to stdout, diagnostics and progress to stderr.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <new>
#include <string>

#include "commands.h"
#include "common.h"
#include "wick/errors.h"
#include "wick/version.h"

int main(int argc, char** argv) {
  CLI::App app{"wick: fast, exact RWKV-7 inference on the CPU", "wick"};
  app.require_subcommand(1);
  app.footer(
      "Run `wick <command> --help` for a command's options.\n"
      "Exit status: 0 success, 1 error in the input (file, model, arguments), 2 internal error,\n"
      "other non-zero values: command-line syntax errors.");
  app.set_version_flag("--version", "wick " + std::string(wick::version()));
  wick::cli::register_generate(app);
  wick::cli::register_chat(app);
  wick::cli::register_info(app);
  wick::cli::register_logits(app);
  wick::cli::register_tokenize(app);
  wick::cli::register_detokenize(app);
  wick::cli::register_bench(app);
  wick::cli::register_synth(app);
  wick::cli::register_quantize(app);
  wick::cli::register_embed(app);
  wick::cli::register_rerank(app);
  wick::cli::register_ppl(app);
  wick::cli::register_kl(app);
  wick::cli::register_act_stats(app);
  wick::cli::register_calibrate(app);
  wick::cli::register_lora_merge(app);
  wick::cli::register_serve(app);
  wick::cli::add_tokenizer_mismatch_flag(app);  // every command with --tokenizer and --model
  if (argc == 1) {
    std::cout << app.help();
    return 0;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const wick::InternalError& e) {  // a WICK_CHECK failed: a bug in wick (exit 2)
    std::fflush(stdout);
    std::cerr << "wick: " << e.what() << "\n";
    return 2;
  } catch (const wick::Error& e) {
    std::fflush(stdout);
    std::cerr << "wick: error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    // Input that needs more memory than there is: an input error (exit 1), not a bug of wick's.
    std::fflush(stdout);
    std::string work = "wick";
    for (const CLI::App* sub : app.get_subcommands()) work += " " + sub->get_name();
    std::cerr << "wick: error: out of memory while running `" << work
              << "`: the model, its states or the input need more memory than this process may "
                 "use (see `ulimit -v`, free memory); try a smaller model, --quantize int8, a "
                 "shorter input or fewer rows\n";
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::cerr << "wick: internal error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
