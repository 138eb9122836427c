#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "wick/errors.h"

namespace wick::io {

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw FileError(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw FileError(path, std::string("cannot stat: ") + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw FileError(path, "not a regular file (expected a checkpoint file)");
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      throw FileError(path, std::string("cannot mmap: ") + std::strerror(e));
    }
    // Ask for the file's pages in huge (2 MiB) folios where the kernel can: pages read in through
    // this mapping then come in PMD-sized pieces and are mapped with one TLB entry each. A decode
    // step streams every weight once, and in 4 KiB pages a 3 GB model is ~700 000 pages a token
    // (README: "Huge pages for the weights"). Advice only: a kernel without transparent huge
    // pages or with them set to "never", a file system without large folios, or pages already
    // cached in small ones may leave the mapping as it was, so a failure is not an error.
    (void)::madvise(p, f->size_, MADV_HUGEPAGE);
    f->data_ = static_cast<const uint8_t*>(p);
    f->owns_mapping_ = true;
  }
  ::close(fd);
  return f;
}

std::shared_ptr<MappedFile> MappedFile::borrow(const uint8_t* data, size_t size, std::string name) {
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->data_ = data;
  f->size_ = size;
  f->path_ = std::move(name);
  return f;
}

bool MappedFile::holds(const void* p, size_t n) const {
  // As addresses (comparing pointers into different objects is undefined).
  const auto b = reinterpret_cast<uintptr_t>(p), base = reinterpret_cast<uintptr_t>(data_);
  return data_ != nullptr && b >= base && n <= size_ && b - base <= size_ - n;
}

MappedFile::PageRange MappedFile::own_pages(const void* p, size_t n) const {
  if (!owns_mapping_ || !holds(p, n)) return {};
  const auto b = reinterpret_cast<uintptr_t>(p);
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (b + page - 1) / page * page;
  const uintptr_t hi = (b + n) / page * page;
  if (hi <= lo) return {};
  return {lo, hi};
}

size_t MappedFile::release_pages(const void* p, size_t n) const {
  const PageRange r = own_pages(p, n);
  if (r.hi == r.lo) return 0;
  if (::madvise(reinterpret_cast<void*>(r.lo), r.hi - r.lo, MADV_DONTNEED) != 0) return 0;
  return r.hi - r.lo;
}

size_t MappedFile::advise_sparse(const void* p, size_t n) const {
  const PageRange r = own_pages(p, n);
  if (r.hi == r.lo) return 0;
  void* lo = reinterpret_cast<void*>(r.lo);
  // Without transparent huge pages the kernel refuses MADV_NOHUGEPAGE (EINVAL): there are none to
  // avoid, so only MADV_RANDOM decides.
  (void)::madvise(lo, r.hi - r.lo, MADV_NOHUGEPAGE);
  if (::madvise(lo, r.hi - r.lo, MADV_RANDOM) != 0) return 0;
  return r.hi - r.lo;
}

MappedFile::~MappedFile() {
  if (owns_mapping_ && data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace wick::io
