"""Spectra: the torch.fft family (fft, ifft, rfft, irfft, hfft, ihfft; their 2-D and n-D forms) and
torch.stft / torch.istft.

Every transform is one n-D transform over ``dim`` with sizes ``s`` (``n`` for the 1-D
forms), PyTorch's defaults: the 1-D forms take dim=-1, the 2-D forms dim=(-2,-1),
the n-D forms all dims, or the last len(s) when only s is given; an entry -1 in s
keeps that dim's size.  ``norm`` is backward (None), ortho or forward.  The
Hermitian transforms are stated through the real ones, with the norm's direction
swapped: hfftn(x) = irfftn(conj(x)) and ihfftn(x) = conj(rfftn(x)).
Real inputs to complex transforms are widened (float32 -> complex64) and results
keep single precision, as in PyTorch.
"""

from __future__ import annotations

from ..errors import ShapeError
from .base import Op, normalize_axis
from .complex_tensors import complex_dtype, real_dtype
from .params import Bool, Choice, Int

NORMS = ("backward", "ortho", "forward")
_SWAPPED = {"backward": "forward", "ortho": "ortho", "forward": "backward"}

TRANSFORMS = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
# form "1d" takes n and an int dim; "2d" and "nd" take s and a list of dims.
FORMS = ("1d", "2d", "nd")


class FFT(Op):
    """``transform`` (fft, ifft, rfft, irfft, hfft, ihfft) in one of three ``form``s: 1d, 2d, nd."""

    types = ("FFT",)
    arity = 1

    def setup(self):
        self.kind = self.choice_param("transform", TRANSFORMS)
        form = self.choice_param("form", FORMS)
        self.norm = self.choice_param("norm", (None, *NORMS), default=None) or "backward"
        if form == "1d":
            n = self.optional_int_param("n")
            self.sizes = None if n is None else (n,)
            self.dims = (self.int_param("dim", default=-1),)
        else:
            self.sizes = None if self.param("s", None) is None else self.ints_param("s")
            default_dims = [-2, -1] if form == "2d" else None
            dims = self.param("dim", default_dims)
            self.dims = None if dims is None else self.ints_param("dim", default=default_dims)
        if self.sizes is not None and self.dims is not None and len(self.sizes) != len(self.dims):
            raise self.error(f"'s' {list(self.sizes)} and 'dim' {list(self.dims)} differ in length")
        if self.sizes is not None and any(size < 1 and size != -1 for size in self.sizes):
            raise self.error(f"transform sizes must be positive (or -1), found {list(self.sizes)}")

    def _axes_and_sizes(self, x):
        if self.dims is not None:
            axes = tuple(normalize_axis(d, x.ndim, self) for d in self.dims)
        elif self.sizes is not None:
            axes = tuple(range(x.ndim - len(self.sizes), x.ndim))
        else:
            axes = tuple(range(x.ndim))
        if len(set(axes)) != len(axes) or (self.sizes is not None and len(axes) != len(self.sizes)):
            raise ShapeError(f"{self.node.describe()}: dims {self.dims} do not fit a tensor of rank {x.ndim}")
        if self.sizes is None:
            return axes, None
        sizes = []
        for i, (axis, size) in enumerate(zip(axes, self.sizes)):
            if size == -1:  # keep: the input's size, or for a complex-to-real last dim, 2 * (m - 1)
                size = 2 * (x.shape[axis] - 1) if self.kind in ("irfft", "hfft") and i == len(axes) - 1 else x.shape[axis]
            sizes.append(size)
        return axes, tuple(sizes)

    def forward(self, x):
        xp = self.xp
        fft = xp.fft
        axes, sizes = self._axes_and_sizes(x)
        if self.kind in ("rfft", "ihfft"):
            if xp.isdtype(x.dtype, "complex floating"):
                raise ShapeError(f"{self.node.describe()}: needs a real input, found {x.dtype}")
            real = x if xp.isdtype(x.dtype, "real floating") else xp.astype(x, xp.float32)
            if self.kind == "rfft":
                out = fft.rfftn(real, s=sizes, axes=axes, norm=self.norm)
            else:
                out = xp.conj(fft.rfftn(real, s=sizes, axes=axes, norm=_SWAPPED[self.norm]))
            return xp.astype(out, complex_dtype(xp, real.dtype))
        dtype = complex_dtype(xp, x.dtype if xp.isdtype(x.dtype, ("real floating", "complex floating")) else xp.float32)
        z = xp.astype(x, dtype)
        if self.kind == "fft":
            return xp.astype(fft.fftn(z, s=sizes, axes=axes, norm=self.norm), dtype)
        if self.kind == "ifft":
            return xp.astype(fft.ifftn(z, s=sizes, axes=axes, norm=self.norm), dtype)
        if self.kind == "irfft":
            out = fft.irfftn(z, s=sizes, axes=axes, norm=self.norm)
        else:  # hfft
            out = fft.irfftn(xp.conj(z), s=sizes, axes=axes, norm=_SWAPPED[self.norm])
        return xp.astype(out, real_dtype(xp, dtype))


# ---------------------------------------------------------------- short-time transforms


class _Frames(Op):
    """Params shared by stft and istft, and the window padded to n_fft."""

    params = (
        Int("n_fft", low=1), Int("hop_length", default=None, low=1, attr="hop"),
        Int("win_length", default=None, low=1), Bool("normalized", default=False), Bool("center", default=True),
        Bool("onesided", default=None),
    )

    def read_frame_params(self):
        self.hop = self.hop or self.n_fft // 4  # PyTorch's defaults
        self.win_length = self.win_length or self.n_fft
        if self.hop < 1 or self.win_length > self.n_fft:
            raise self.error(f"needs hop_length >= 1 and win_length <= n_fft, found n_fft={self.n_fft} "
                             f"hop_length={self.hop} win_length={self.win_length}")
        self.data_at = self.input_index("input", 0)
        self.window_at = self.input_index("window")
        self.require_inputs(1 if self.window_at is None else 2)

    def full_window(self, inputs, dtype):
        """The window (ones by default), zero-padded on both sides to n_fft."""
        xp = self.xp
        if self.window_at is None:
            window = xp.ones((self.win_length,), dtype=dtype)
        else:
            window = xp.astype(inputs[self.window_at], dtype)
            if tuple(window.shape) != (self.win_length,):
                raise ShapeError(f"{self.node.describe()}: window has shape {tuple(window.shape)}, "
                                 f"expected ({self.win_length},)")
        left = (self.n_fft - self.win_length) // 2
        return self.backend.pad(window, ((left, self.n_fft - self.win_length - left),), "constant", value=0.0)


class STFT(_Frames):
    types = ("STFT",)
    params = (*_Frames.params, Choice("pad_mode", ("reflect", "constant", "replicate", "circular"), default="reflect"),
              Bool("return_complex", default=True))

    def setup(self):
        self.read_frame_params()

    def forward(self, *inputs):
        xp = self.xp
        x = inputs[self.data_at]
        if x.ndim not in (1, 2) or not xp.isdtype(x.dtype, ("real floating", "complex floating")):
            raise ShapeError(f"{self.node.describe()}: needs a 1-D or 2-D float or complex signal, "
                             f"found {tuple(x.shape)} {x.dtype}")
        signal = x if x.ndim == 2 else x[None]
        if self.center:
            half = self.n_fft // 2
            signal = self.backend.pad(signal, ((0, 0), (half, half)), self.pad_mode, value=0.0)
        length = signal.shape[-1]
        if length < self.n_fft:
            raise ShapeError(f"{self.node.describe()}: a signal of {length} samples is shorter than n_fft={self.n_fft}")
        frame_count = 1 + (length - self.n_fft) // self.hop
        window = self.full_window(inputs, real_dtype(xp, x.dtype))
        frames = self.backend.sliding_window(signal, (self.n_fft,), (1,))[:, 0 : (frame_count - 1) * self.hop + 1 : self.hop, :]
        frames = frames * window
        onesided = self.onesided if self.onesided is not None else not xp.isdtype(x.dtype, "complex floating")
        norm = "ortho" if self.normalized else "backward"
        if onesided:
            spectrum = xp.fft.rfft(frames, axis=-1, norm=norm)
        else:
            spectrum = xp.fft.fft(xp.astype(frames, complex_dtype(xp, frames.dtype)), axis=-1, norm=norm)
        spectrum = xp.astype(xp.permute_dims(spectrum, (0, 2, 1)), complex_dtype(xp, x.dtype))  # (B, freq, frames)
        if not self.return_complex:
            spectrum = xp.stack([xp.real(spectrum), xp.imag(spectrum)], axis=-1)
        return spectrum if x.ndim == 2 else spectrum[0]


class ISTFT(_Frames):
    """torch.istft: inverse transforms of the frames, windowed, overlap-added and divided by the
    summed squared window (PyTorch refuses where that envelope is ~0: so does this).
    ``return_complex=True`` (two-sided spectra only) keeps the complex inverse transforms."""

    types = ("ISTFT",)
    params = (*_Frames.params, Int("length", default=None), Bool("return_complex", default=False))

    def setup(self):
        self.read_frame_params()
        if self.return_complex and self.onesided:
            raise self.error("return_complex=True needs a two-sided spectrum (onesided=False)")

    def forward(self, *inputs):
        xp = self.xp
        spectrum = inputs[self.data_at]
        if spectrum.ndim not in (2, 3) or not xp.isdtype(spectrum.dtype, "complex floating"):
            raise ShapeError(f"{self.node.describe()}: needs a complex (freq, frames) or (B, freq, frames) input, "
                             f"found {tuple(spectrum.shape)} {spectrum.dtype}")
        batched = spectrum if spectrum.ndim == 3 else spectrum[None]
        batch, freqs, frame_count = batched.shape
        onesided = self.onesided if self.onesided is not None else freqs != self.n_fft
        if self.return_complex and onesided:
            raise ShapeError(f"{self.node.describe()}: return_complex=True needs {self.n_fft} frequencies, found {freqs}")
        expected = self.n_fft // 2 + 1 if onesided else self.n_fft
        if freqs != expected:
            raise ShapeError(f"{self.node.describe()}: {freqs} frequencies, expected {expected} for n_fft={self.n_fft}")
        norm = "ortho" if self.normalized else "backward"
        columns = xp.permute_dims(batched, (0, 2, 1))  # (B, frames, freq)
        if onesided:
            frames = xp.fft.irfft(columns, n=self.n_fft, axis=-1, norm=norm)
        else:
            frames = xp.fft.ifft(columns, n=self.n_fft, axis=-1, norm=norm)
            frames = frames if self.return_complex else xp.real(frames)
        dtype = spectrum.dtype if self.return_complex else real_dtype(xp, spectrum.dtype)
        window = self.full_window(inputs, real_dtype(xp, spectrum.dtype))
        frames = xp.astype(frames, dtype) * window
        total = self.n_fft + self.hop * (frame_count - 1)
        # Overlap-add: sample t * hop + k of each frame t, as one scatter over all frames.
        offsets = xp.reshape(xp.arange(frame_count, dtype=xp.int64) * self.hop, (-1, 1)) + xp.arange(self.n_fft, dtype=xp.int64)
        offsets = xp.reshape(offsets, (-1,))
        signal = xp.zeros((batch * total,), dtype=dtype)
        batch_offsets = xp.reshape(xp.reshape(xp.arange(batch, dtype=xp.int64) * total, (-1, 1)) + offsets, (-1,))
        self.backend.scatter_add(signal, batch_offsets, xp.reshape(frames, (-1,)))
        envelope = xp.zeros((total,), dtype=window.dtype)
        squared = xp.broadcast_to(window * window, (frame_count, self.n_fft))
        self.backend.scatter_add(envelope, offsets, xp.reshape(squared, (-1,)))
        start = self.n_fft // 2 if self.center else 0
        if self.length is not None:
            end = start + self.length
        else:
            end = total - self.n_fft // 2 if self.center else total
        signal = xp.reshape(signal, (batch, total))[:, start:min(end, total)]
        envelope = envelope[start:min(end, total)]
        if envelope.size and float(xp.min(xp.abs(envelope))) < 1e-11:
            raise ShapeError(f"{self.node.describe()}: the window overlap-add envelope is zero somewhere "
                             "(PyTorch rejects such a window/hop_length too)")
        signal = signal / envelope
        if end > total:
            signal = self.backend.pad(signal, ((0, 0), (0, end - total)), "constant", value=0.0)
        return signal if spectrum.ndim == 3 else signal[0]


OPS = [FFT, STFT, ISTFT]
