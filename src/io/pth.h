// PyTorch `.pth` checkpoint reader: the zip archive `torch.save` has written since PyTorch 1.6
// (torch/serialization.py `_save`; the layout is described in
// caffe2/serialize/inline_container.h). The official BlinkDL RWKV-7 checkpoints are this format.
//
//   <prefix>/data.pkl      pickle (protocol 2) of the state dict: name -> tensor, where each
//                          tensor is torch._utils._rebuild_tensor_v2(storage, storage_offset,
//                          size, stride, requires_grad, backward_hooks) and `storage` is a
//                          persistent id ('storage', torch.<T>Storage, key, location, numel)
//   <prefix>/data/<key>    the raw little-endian bytes of storage <key> (entry stored, not
//                          compressed; torch aligns it to 64 bytes)
//   <prefix>/byteorder     "little" (absent in files from older PyTorch, which were little)
//   <prefix>/version, ...  ignored
//
// The pickle is read by the restricted unpickler in pickle.h: nothing is executed. Tensors must
// be row-major contiguous and lie inside their storage; the views point into the mapped file
// (no copies). Values of the state dict that are not tensors (e.g. a list of layer indices) are
// kept as JSON text in TensorSet::metadata() under their key.
#pragma once

#include <memory>

#include "io/tensor_set.h"

namespace wick::io {

// Reads a torch.save zip checkpoint holding a (flat) state dict. Throws FormatError (naming the
// file and, where there is one, the tensor or zip entry) for a malformed archive, a storage that
// does not back its tensor, a non-contiguous tensor or an unsupported dtype, and
// UnsafePickleError for a pickle that needs anything beyond a tensor state dict.
TensorSet read_pth(std::shared_ptr<MappedFile> file);

// True if the file starts like a zip archive (local file header signature "PK\3\4").
bool looks_like_zip(const MappedFile& file);

}  // namespace wick::io
