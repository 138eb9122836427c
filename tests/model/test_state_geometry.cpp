// The one state-geometry check (model/state_geometry.h): the forward pass, save_state, load_state,
// the engine and the State constructor refuse a state of another model with the same message -
// what was found, what the model has, what to do - each with its own error type.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/state_geometry.h"
#include "test_util.h"
#include "wick/engine.h"
#include "wick/errors.h"
#include "wick/model.h"
#include "wick/state_file.h"
#include "wick/tokenizer.h"

namespace wick {
namespace {

using test::scratch_dir;
using test::synthetic_model;

const char* const kFound =
    "has geometry (L=1, C=64, H=1, N=64) but the model has (L=2, C=64, H=1, N=64)";
const char* const kWhatToDo = "create it with Model::new_state() of this model";

template <class Error, class Fn>
std::string message_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no exception of the expected type";
  return "";
}

void expect_refusal(const std::string& m, const std::string& subject) {
  EXPECT_NE(m.find(subject + " " + kFound), std::string::npos) << m;
  EXPECT_NE(m.find(kWhatToDo), std::string::npos) << m;
}

TEST(StateGeometry, EverySiteRefusesAStateOfAnotherModelWithTheOneMessage) {
  const Model two = synthetic_model("2:64:256", DType::F32, 11);
  const Model one = synthetic_model("1:64:256", DType::F32, 12);
  State other = one.new_state();
  ASSERT_FALSE(state_fits(other, two.geometry()));
  ASSERT_TRUE(state_fits(two.new_state(), two.geometry()));
  const std::vector<int32_t> tokens{1, 2, 3};

  expect_refusal(message_of<InputError>([&] { two.forward(tokens, other); }), "the state");
  expect_refusal(message_of<InputError>([&] { serialize_state(other, two); }), "the state to save");

  // A file saved by the 1-layer model, read for the 2-layer one: StateFileError, same words.
  const std::string path = (scratch_dir() / "one_layer.st").string();
  save_state(path, other, one);
  expect_refusal(message_of<StateFileError>([&] { load_state(path, two); }), "the saved state");

  ByteTokenizer tok;
  Engine engine(two, tok, EngineOptions{});
  expect_refusal(message_of<InputError>([&] { engine.register_state("x", other); }),
                 "register_state 'x': the state");
  Request r;
  r.prompt_tokens = tokens;
  r.config.max_tokens = 1;
  r.initial_state = other;
  expect_refusal(message_of<InputError>([&] { engine.submit(r); }), "the request's initial state");
}

TEST(StateGeometry, TextNamesAttentionBlocksAndTheConstructorUsesIt) {
  EXPECT_EQ(geometry_text({2, 64, 1, 64, 0}), "L=2, C=64, H=1, N=64");
  EXPECT_EQ(geometry_text({4, 256, 4, 64, 2}), "L=4, C=256, H=4, N=64, attention blocks=2");
  const std::string m = message_of<InputError>([] { State s(1, 64, 2, 64); });
  EXPECT_NE(m.find("invalid state geometry (L=1, C=64, H=2, N=64): expected positive sizes with "
                   "H*N == C"),
            std::string::npos)
      << m;
}

}  // namespace
}  // namespace wick
