#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "wick/errors.h"

namespace wick::io {

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  namespace fs = std::filesystem;
  fs::path target(path_);
  fs::path dir = target.parent_path();
  if (dir.empty()) dir = ".";
  std::string tmpl = (dir / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  fd_ = ::mkstemp(name.data());
  if (fd_ < 0) {
    throw FileError(path_, std::string("cannot create a temporary file in ") + dir.string() + ": " +
                               std::strerror(errno));
  }
  tmp_ = name.data();
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void AtomicFile::fail(const std::string& what) {
  const int e = errno;
  throw FileError(path_, what + ": " + std::strerror(e));  // the destructor cleans up
}

void AtomicFile::write(const char* data, size_t n) {
  size_t done = 0;
  while (done < n) {
    const ssize_t w = ::write(fd_, data + done, n - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("cannot write " + tmp_);
    }
    done += static_cast<size_t>(w);
  }
  size_ += n;
}

void AtomicFile::write_at(uint64_t offset, const char* data, size_t n) {
  size_t done = 0;
  while (done < n) {
    const ssize_t w = ::pwrite(fd_, data + done, n - done, static_cast<off_t>(offset + done));
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("cannot write " + tmp_);
    }
    done += static_cast<size_t>(w);
  }
}

void AtomicFile::resize(uint64_t bytes) {
  if (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0) fail("cannot size " + tmp_);
}

void AtomicFile::commit() {
  // mkstemp creates the file 0600; give it the usual permissions of a new file (best effort).
  (void)::fchmod(fd_, 0644);
  if (::fsync(fd_) != 0) fail("cannot flush " + tmp_);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("cannot close " + tmp_);
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail("cannot rename " + tmp_ + " to it");
  committed_ = true;
}

}  // namespace wick::io
