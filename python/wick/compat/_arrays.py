"""Array types of the compat layer: torch tensors when torch is importable (as the pip package
returns them), numpy arrays otherwise (wick.FloatArray when neither is installed)."""

try:  # torch is optional: never required, used when present
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

try:
    import numpy
except ImportError:  # pragma: no cover - depends on the machine
    numpy = None


if numpy is not None:
    class CompatArray(numpy.ndarray):
        """A numpy array that also answers the torch calls ChatRWKV-style scripts make on
        logits and states (.float(), .cpu(), .detach(), .numpy(), .clone()), so they run
        unchanged without torch."""

        def float(self):
            return self if self.dtype == numpy.float32 else self.astype(numpy.float32)

        def cpu(self):
            return self

        def detach(self):
            return self

        def numpy(self):
            return self.view(numpy.ndarray)

        def clone(self):
            return self.copy()


def to_user(array):
    """A float32 array from wick -> what the pip package would hand out (shares memory): a
    torch tensor when torch is importable, else a CompatArray (numpy), else the array as is."""
    if torch is not None:
        return torch.from_numpy(array)
    if numpy is not None:
        return array.view(CompatArray)
    return array


def native_views(state):
    """Float32, C-contiguous, writable arrays over the elements of a state list, for wick's pass
    to read and write in place. An element that cannot be viewed that way (another dtype or
    device, non-contiguous) is replaced in the list by a float32 copy first, so the list still
    holds what the pass writes, as the pip package's list does."""
    views = []
    for i, x in enumerate(state):
        if torch is not None and isinstance(x, torch.Tensor):
            if not (x.dtype == torch.float32 and x.device.type == "cpu" and x.is_contiguous()
                    and not x.requires_grad):
                x = x.detach().to(device="cpu", dtype=torch.float32).contiguous()
                state[i] = x
            views.append(x.numpy())
        elif numpy is not None and isinstance(x, numpy.ndarray):
            if not (x.dtype == numpy.float32 and x.flags.c_contiguous and x.flags.writeable):
                x = numpy.ascontiguousarray(x, dtype=numpy.float32)
                state[i] = x
            views.append(x)
        else:
            views.append(x)  # wick.FloatArray or another float32 buffer; checked natively
    return views


def draw_seed():
    """A 63-bit seed for wick's sampler from the generator pip-package users seed:
    numpy's global one (numpy.random.seed(...) makes runs repeat), else Python's."""
    if numpy is not None:
        return int(numpy.random.randint(0, 2**63 - 1, dtype=numpy.int64))
    import random
    return random.getrandbits(63)
