"""Counter-based, column-addressable synthetic data: the FSA paper's equicorrelated design.

Barbu et al., *Feature Selection with Annealing* (FSA paper), §3.1.3 eq. (18), builds the data of
its Figure 1 as

    x_i = α·z_i·1_M + ε_i,   z_i ~ N(0, 1),   ε_i ~ N(0, I_M),   α = 0.5,

so every pair of columns has correlation α²/(1+α²), and labels the rows with the classification
rule of §3.1 eq. (17):

    y_i = 1  if  Σ_{j=1..k*} x_{i,10j} > 0,  else 0

(1-based column numbers 10, 20, …, 10k*; the 0-based columns ``10j − 1``). The "noisy labels"
variant of §3.1 replaces the label of a random 10 % of the rows by a random label
(``label_noise=0.1``).

At the paper's size (N = 10⁶, M = 10⁵) X is 400 GB in float32, so it is never stored: entry
(i, j) is a pure function of ``(seed, i, j)``. A 32-bit integer hash (two rounds of the
"lowbias32" mixer, one per row and one per entry) gives 23 uniform bits, turned into a normal by
the inverse CDF (``√2·erfinv(2u − 1)`` by Giles' float32 approximation, u never 0 or 1, so
|ε| ≤ 5.3). Whatever rows, columns,
order or block shape are asked for, an entry is the same value, bitwise, on one backend.

The products :meth:`EquicorrelatedSource.matvec_block`,
:meth:`~EquicorrelatedSource.rmatvec_block`, the fused gradient
:meth:`~EquicorrelatedSource.gradient_block` and the column moments
:meth:`~EquicorrelatedSource.moments_block` generate the entries inside the same compiled kernel
as the product, one cache-sized tile of rows at a time (:data:`TILE_ENTRIES`), so the block itself
is never stored. They generate ε only and add the rank-one part ``α z 1ᵀ`` in closed form
(``X v = E v + α z (1ᵀv)``, ``uᵀX = uᵀE + α (uᵀz) 1ᵀ``), so they equal the products of
:meth:`~EquicorrelatedSource.block` to float32 rounding (not bitwise).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxselect._compat import is_tracer, top_level
from jaxselect._validation import check_float, check_int

__all__ = ["EquicorrelatedSource", "equicorrelated_normals"]

_U32 = np.uint32
#: bytes of one generated block of :meth:`EquicorrelatedSource.materialize` (a host copy each)
MATERIALIZE_BLOCK_BYTES = 1 << 26
#: hash stream offsets: the row keys of ε, of z and of the label noise are distinct bijections of i
_STREAM_EPS, _STREAM_Z, _STREAM_NOISE, _STREAM_FLIP = 0x9E3779B9, 0x7F4A7C15, 0x2545F491, 0x6A09E667
_COL_MULT = 0x85EBCA6B


def _mix_np(x: int) -> int:
    """lowbias32 on a Python int (host side, for the seed's keys)."""
    x &= 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    return x ^ (x >> 16)


def _mix(x: jax.Array) -> jax.Array:
    """lowbias32 (C. Wellons' 32-bit integer hash): a bijection of uint32 with low bias."""
    x = x ^ (x >> _U32(16))
    x = x * _U32(0x7FEB352D)
    x = x ^ (x >> _U32(15))
    x = x * _U32(0x846CA68B)
    return x ^ (x >> _U32(16))


#: Giles' single-precision erfinv (M. Giles, "Approximating the erfinv function", GPU Computing
#: Gems, 2011): polynomials in w − 2.5 (w < 5) and √w − 3 (w ≥ 5), w = −log(1 − x²)
_ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                   -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _horner(coeffs, t):
    p = jnp.float32(coeffs[0])
    for c in coeffs[1:]:
        p = jnp.float32(c) + p * t
    return p


def _normal_from_bits(h: jax.Array) -> jax.Array:
    """float32 N(0, 1) from uint32 bits by the inverse CDF of the top 23 bits: √2·erfinv(x).

    x = (2m + 1)/2²³ − 1 with m the top 23 bits: symmetric, never ±1. ``1 + x`` and ``1 − x`` are
    exact in float32, so w = −log((1 + x)(1 − x)) keeps its precision in the tails (|error| of the
    normal < 10⁻⁶ against a float64 erfinv, monotone in m), where ``lax.erf_inv``'s 1 − x·x loses it; and
    Giles' two polynomials with a plain ``log`` ran 1.6–1.9× faster than ``lax.erf_inv`` in the
    fused kernels on CPU.
    """
    m = (h >> _U32(9)).astype(jnp.float32)
    t = (m + jnp.float32(0.5)) * jnp.float32(2.0**-22)  # 1 + x, exact
    w = -jnp.log(t * (jnp.float32(2.0) - t))
    central = _horner(_ERFINV_CENTRAL, w - jnp.float32(2.5))
    tail = _horner(_ERFINV_TAIL, jnp.sqrt(w) - jnp.float32(3.0))
    return jnp.float32(math.sqrt(2.0)) * jnp.where(w < jnp.float32(5.0), central, tail) * (t - jnp.float32(1.0))


def _row_keys(rows: jax.Array, key: jax.Array) -> jax.Array:
    return _mix(rows.astype(jnp.uint32) ^ key)


def _entry_bits(row_keys: jax.Array, cols: jax.Array, col_key: jax.Array) -> jax.Array:
    """(n, m) uint32 bits of entries (rows × cols) from the rows' keys (n,) and the columns (m,)."""
    c = cols.astype(jnp.uint32) * _U32(_COL_MULT) + col_key
    return _mix(row_keys[:, None] ^ c[None, :])


def equicorrelated_normals(rows: jax.Array, cols: jax.Array, keys: jax.Array) -> jax.Array:
    """(n, m) float32 ε_ij ~ N(0, 1) of eq. (18) for rows (n,) × cols (m,) (int32 indices).

    Args:
      rows: (n,) int32 row numbers.
      cols: (m,) int32 column numbers.
      keys: (2,) uint32 (row key, column key) derived from the seed (:attr:`EquicorrelatedSource.keys`).
    """
    return _normal_from_bits(_entry_bits(_row_keys(rows, keys[0]), cols, keys[1]))


def _common_factor(rows: jax.Array, keys: jax.Array) -> jax.Array:
    """(n,) float32 z_i ~ N(0, 1) of eq. (18)."""
    return _normal_from_bits(_mix(_row_keys(rows, keys[0] ^ _U32(_STREAM_Z)) ^ keys[1]))


def _entries(rows, cols, keys, alpha, dtype):
    """(n, m) entries x_ij = α z_i + ε_ij in ``dtype`` (ε and z generated in float32)."""
    eps = equicorrelated_normals(rows, cols, keys).astype(dtype)
    z = _common_factor(rows, keys).astype(dtype)
    return alpha.astype(dtype) * z[:, None] + eps


def _block(rows, cols, keys, alpha, *, dtype):
    return _entries(rows, cols, keys, alpha, dtype)


#: entries of one tile generated inside the fused products (≈ 1 MB in float32: stays in cache)
TILE_ENTRIES = 1 << 18


def _tile_rows(n_rows: int, n_cols: int) -> int:
    return max(1, min(n_rows, TILE_ENTRIES // max(1, n_cols)))


def _tiles(row_start, n_rows: int, n_samples, n_cols: int):
    """(tile row count R, (T,) first rows of the T tiles covering the block, in-block limit)."""
    rt = _tile_rows(n_rows, n_cols)
    n_tiles = -(-n_rows // rt)
    starts = row_start + rt * jnp.arange(n_tiles, dtype=jnp.int32)
    return rt, starts, jnp.minimum(row_start + n_rows, n_samples)


#: XLA option of the kernels on CPU: 512-bit vectors (XLA prefers 256). Where AVX-512 exists the
#: generation ran 1.5× faster on a lightly loaded 2-core machine (7.5–8.1·10⁸ against 5.1–5.2·10⁸
#: entries per CPU second, three runs) and no faster under heavy load (both 2.8·10⁸); no value
#: changes (XLA contracts nothing to FMA; tested bitwise)
_CPU_KERNEL_OPTIONS = {"xla_cpu_prefer_vector_width": 512}


def _kernel(name: str):
    """The jitted kernel ``name``: with :data:`_CPU_KERNEL_OPTIONS` when called at top level on CPU.

    Inside an outer ``jax.jit`` (where XLA refuses per-function options) it is the plain jitted
    function, inlined and compiled with the outer function's options.
    """
    return _jitted(name, top_level() and jax.default_backend() == "cpu")


@functools.cache
def _jitted(name: str, with_options: bool):
    fun, static = _KERNELS[name]
    return jax.jit(fun, static_argnames=static, compiler_options=_CPU_KERNEL_OPTIONS if with_options else None)


def _col_keys(cols: jax.Array, keys: jax.Array) -> jax.Array:
    return cols.astype(jnp.uint32) * _U32(_COL_MULT) + keys[1]


def _tile_parts(rows, col_keys, keys, alpha, dtype):
    """ε (R, m) of a tile of rows, and α·z (R,) of its rows: the tile's X is ``α z 1ᵀ + ε``."""
    eps = _normal_from_bits(_mix(_row_keys(rows, keys[0])[:, None] ^ col_keys[None, :])).astype(dtype)
    return eps, alpha.astype(dtype) * _common_factor(rows, keys).astype(dtype)


def _matvec(row_start, n_samples, cols, v, keys, alpha, *, n_rows: int):
    rt, starts, stop = _tiles(row_start, n_rows, n_samples, cols.shape[0])
    ck, sv = _col_keys(cols, keys), jnp.sum(v)

    def tile(start):
        rows = start + jnp.arange(rt, dtype=jnp.int32)
        eps, az = _tile_parts(rows, ck, keys, alpha, v.dtype)
        return jnp.where(rows < stop, eps @ v + az * sv, jnp.zeros((), v.dtype))

    return jax.lax.map(tile, starts).reshape(-1)[:n_rows]


def _rmatvec(row_start, n_samples, cols, u, keys, alpha, *, n_rows: int):
    rt, starts, stop = _tiles(row_start, n_rows, n_samples, cols.shape[0])
    ck = _col_keys(cols, keys)
    u = jnp.pad(u, (0, rt * starts.shape[0] - n_rows))

    def tile(t, acc):
        rows = starts[t] + jnp.arange(rt, dtype=jnp.int32)
        ut = jax.lax.dynamic_slice_in_dim(u, t * rt, rt)
        ut = jnp.where(rows < stop, ut, jnp.zeros((), u.dtype))
        eps, az = _tile_parts(rows, ck, keys, alpha, u.dtype)
        return acc + (ut @ eps + ut @ az)

    return jax.lax.fori_loop(0, starts.shape[0], tile, jnp.zeros(cols.shape[0], u.dtype))


def _gradient(row_start, n_samples, cols, v, keys, alpha, fn, *, n_rows: int):
    rt, starts, stop = _tiles(row_start, n_rows, n_samples, cols.shape[0])
    ck, sv = _col_keys(cols, keys), jnp.sum(v)
    zero = jnp.zeros((), v.dtype)

    def tile(g, start):
        rows = start + jnp.arange(rt, dtype=jnp.int32)
        live = rows < stop
        eps, az = _tile_parts(rows, ck, keys, alpha, v.dtype)  # the tile's entries, generated once
        s = jnp.where(live, eps @ v + az * sv, zero)
        u = jnp.asarray(fn(s, rows))
        if u.shape != (rt,):
            raise ValueError(
                f"fn(s, rows) must return one weight per row, shape ({rt},); got shape {u.shape}"
            )
        u = jnp.where(live, u.astype(v.dtype), zero)  # rows past the block: no weight, even NaN
        return g + (u @ eps + u @ az), s

    g, s = jax.lax.scan(tile, jnp.zeros(cols.shape[0], v.dtype), starts)
    return s.reshape(-1)[:n_rows], g


def _moments(row_start, n_samples, cols, keys, alpha, *, n_rows: int, dtype):
    rt, starts, stop = _tiles(row_start, n_rows, n_samples, cols.shape[0])
    ck = _col_keys(cols, keys)

    def tile(acc, start):
        rows = start + jnp.arange(rt, dtype=jnp.int32)
        w = (rows < stop).astype(dtype)  # rows past the block or N: weight 0
        eps, az = _tile_parts(rows, ck, keys, alpha, dtype)
        x = az[:, None] + eps
        return acc + jnp.stack([w @ x, w @ (x * x)]), None

    acc, _ = jax.lax.scan(tile, jnp.zeros((2, cols.shape[0]), dtype), starts)
    return acc[0], acc[1]


def _summary(row_start, n_samples, cols, w, keys, alpha, *, n_rows: int, dtype, masked: bool):
    """(min, max over rows of weight > 0, Σw, mean, Σ w (x − mean)²) of a row block, one tile at a
    time: sums of the entries shifted by the block's first row (so the variance does not cancel).
    ``masked=False`` (every row of the block inside N with a positive weight) skips the masking of
    the extremes (a select per entry: ~1.3× the kernel's time)."""
    rt, starts, stop = _tiles(row_start, n_rows, n_samples, cols.shape[0])
    ck = _col_keys(cols, keys)
    w = jnp.pad(w.astype(dtype), (0, rt * starts.shape[0] - n_rows))
    first = jnp.reshape(row_start, (1,))
    eps0, az0 = _tile_parts(first, ck, keys, alpha, dtype)
    shift = az0[:, None] + eps0  # (1, m): the block's first row
    m = cols.shape[0]
    inf = jnp.asarray(jnp.inf, dtype)

    def tile(t, acc):
        lo, hi, s0, s1, s2 = acc
        rows = starts[t] + jnp.arange(rt, dtype=jnp.int32)
        wt = jax.lax.dynamic_slice_in_dim(w, t * rt, rt)
        wt = jnp.where(rows < stop, wt, jnp.zeros((), dtype))
        eps, az = _tile_parts(rows, ck, keys, alpha, dtype)
        x = az[:, None] + eps
        if masked:
            pos = (wt > 0)[:, None]
            lo = jnp.minimum(lo, jnp.min(jnp.where(pos, x, inf), axis=0))
            hi = jnp.maximum(hi, jnp.max(jnp.where(pos, x, -inf), axis=0))
        else:
            lo, hi = jnp.minimum(lo, jnp.min(x, axis=0)), jnp.maximum(hi, jnp.max(x, axis=0))
        d = x - shift
        return lo, hi, s0 + jnp.sum(wt), s1 + wt @ d, s2 + wt @ (d * d)

    zeros = jnp.zeros(m, dtype)
    lo, hi, s0, s1, s2 = jax.lax.fori_loop(
        0, starts.shape[0], tile, (jnp.full(m, inf), jnp.full(m, -inf), jnp.zeros((), dtype), zeros, zeros)
    )
    safe = jnp.where(s0 > 0, s0, jnp.ones((), dtype))
    mean_d = s1 / safe
    return lo, hi, s0, shift[0] + mean_d, jnp.maximum(s2 - s1 * mean_d, jnp.zeros((), dtype))


_KERNELS = {
    "summary": (_summary, ("n_rows", "dtype", "masked")),
    "block": (_block, ("dtype",)),
    "moments": (_moments, ("n_rows", "dtype")),
    "matvec": (_matvec, ("n_rows",)),
    "rmatvec": (_rmatvec, ("n_rows",)),
    "gradient": (_gradient, ("n_rows",)),
}


class EquicorrelatedSource:
    """The FSA paper's eq. (18) design with eq. (17) labels, generated on demand (never stored).

    Entry (i, j) is a pure function of ``(seed, i, j)`` — not of the shape, of the block or of the
    order in which it is asked — so any block of rows × any subset of columns can be produced
    independently, and a 10⁶ × 10⁵ problem needs no storage. See the module docstring for the model.

    Args:
      n_samples: N ≥ 1 rows (< 2³¹).
      n_features: M ≥ 1 columns (< 2³¹).
      n_informative: k* ≥ 0 true variables: the columns 10j − 1 (0-based), j = 1..k*, of eq. (17);
        needs 10k* ≤ M. Default: ``min(500, M // 10)`` (the paper's Figure 1 uses k* = 500).
      alpha: α of eq. (18), finite (default 0.5; pairwise correlation α²/(1+α²) = 0.2).
      seed: integer seed (any Python int; reduced mod 2³²).
      label_noise: fraction in [0, 1] of rows whose label is replaced by a random label (§3.1's
        noisy version uses 0.1); 0 (default) gives the noiseless labels of eq. (17).
      dtype: dtype of the entries (float32 default; float64 needs ``jax_enable_x64``). The normals
        are generated in float32 either way, so a float64 source holds the float32 values.

    Attributes:
      shape: (N, M).
      dtype: numpy dtype of the entries.
      true_features: (k*,) int64 0-based indices of the informative columns, ascending.
      keys: (2,) uint32 hash keys derived from the seed.

    >>> import numpy as np, jaxselect as js
    >>> src = js.datasets.equicorrelated(1000, 200, n_informative=5, seed=1)
    >>> src.shape, src.true_features.tolist()
    ((1000, 200), [9, 19, 29, 39, 49])
    >>> a = np.asarray(src.block(slice(10, 20), np.array([7, 3])))
    >>> b = np.asarray(src.block(np.array([15, 12]), None))
    >>> bool(a[5, 0] == b[0, 7] and a[2, 1] == b[1, 3])
    True
    """

    def __init__(
        self,
        n_samples: int,
        n_features: int,
        *,
        n_informative: int | None = None,
        alpha: float = 0.5,
        seed: int = 0,
        label_noise: float = 0.0,
        dtype=np.float32,
    ):
        n_samples = check_int(n_samples, "n_samples", low=1, high=2**31 - 1)
        n_features = check_int(n_features, "n_features", low=1, high=2**31 - 1)
        if n_informative is None:
            n_informative = min(500, n_features // 10)
        n_informative = check_int(n_informative, "n_informative", low=0)
        if 10 * n_informative > n_features:
            raise ValueError(
                f"n_informative={n_informative} needs n_features >= {10 * n_informative} (the true "
                f"variables are the columns 10, 20, ..., 10·k* of eq. (17)); got n_features={n_features}"
            )
        self.alpha = check_float(alpha, "alpha")
        self.label_noise = check_float(label_noise, "label_noise", low=0.0, high=1.0)
        seed = check_int(seed, "seed")
        dtype = np.dtype(dtype)
        if dtype not in (np.float32, np.float64):
            raise TypeError(f"dtype must be float32 or float64; got {dtype}")
        if dtype == np.float64 and not jax.config.jax_enable_x64:
            raise ValueError("dtype=float64 needs jax_enable_x64 (jax.config.update('jax_enable_x64', True))")
        self.shape = (n_samples, n_features)
        self.dtype = dtype
        self.seed = seed
        self.n_informative = n_informative
        self.true_features = 10 * np.arange(1, n_informative + 1, dtype=np.int64) - 1
        s = seed % 2**32
        self.keys = np.asarray([_mix_np(s ^ _STREAM_EPS), _mix_np(_mix_np(s) + _STREAM_EPS)], dtype=np.uint32)

    def __repr__(self) -> str:
        return (
            f"EquicorrelatedSource(n_samples={self.shape[0]}, n_features={self.shape[1]}, "
            f"n_informative={self.n_informative}, alpha={self.alpha}, seed={self.seed}, "
            f"label_noise={self.label_noise}, dtype={self.dtype.name})"
        )

    @property
    def nbytes(self) -> int:
        """Bytes X would take if materialised."""
        return self.shape[0] * self.shape[1] * self.dtype.itemsize

    # ------------------------------------------------------------------ indices
    def _rows(self, rows) -> np.ndarray:
        n = self.shape[0]
        if isinstance(rows, slice):
            return np.arange(*rows.indices(n), dtype=np.int32)
        return self._index(rows, n, "rows")

    def _cols(self, cols) -> np.ndarray:
        m = self.shape[1]
        if cols is None:
            return np.arange(m, dtype=np.int32)
        if isinstance(cols, slice):
            return np.arange(*cols.indices(m), dtype=np.int32)
        return self._index(cols, m, "cols")

    @staticmethod
    def _index(idx, size: int, name: str) -> np.ndarray:
        idx = np.asarray(idx)
        if idx.ndim != 1 or not (np.issubdtype(idx.dtype, np.integer) or idx.size == 0):
            raise TypeError(f"{name} must be a slice or a 1-D integer array; got shape {idx.shape}, dtype {idx.dtype}")
        if idx.size and (idx.min() < 0 or idx.max() >= size):
            raise IndexError(f"{name} must lie in [0, {size}); got values in [{idx.min()}, {idx.max()}]")
        return idx.astype(np.int32)

    def _kernel_cols(self, cols) -> jax.Array:
        """The fused kernels' columns: validated on the host, or taken as they are when traced
        (inside an outer ``jax.jit``, e.g. a working set that changes every iteration)."""
        if is_tracer(cols):
            if cols.ndim != 1 or not jnp.issubdtype(cols.dtype, jnp.integer):
                raise TypeError(f"cols must be a 1-D integer array; got shape {cols.shape}, dtype {cols.dtype}")
            return cols.astype(jnp.int32)
        return jnp.asarray(self._cols(cols))

    def _column_vector(self, v, cols) -> jax.Array:
        """``v`` as one entry per column of ``cols``, in the source's dtype."""
        v = jnp.asarray(v, dtype=self.dtype)
        if v.shape != cols.shape:
            raise ValueError(f"v must have shape {cols.shape} (one entry per column); got {v.shape}")
        return v

    def _alpha(self):
        return jnp.asarray(self.alpha, dtype=jnp.float32)

    # ------------------------------------------------------------------ entries
    def block(self, rows, cols=None) -> jax.Array:
        """Entries of X on rows × cols.

        Args:
          rows: a slice of rows or a 1-D integer array of row numbers (any order, repeats allowed).
          cols: None (all M columns), a slice, or a 1-D integer array of column numbers.

        Returns:
          (len(rows), len(cols)) ``jax.Array`` of :attr:`dtype`.
        """
        r, c = self._rows(rows), self._cols(cols)
        return _kernel("block")(jnp.asarray(r), jnp.asarray(c), jnp.asarray(self.keys), self._alpha(), dtype=self.dtype)

    def common_factor(self, rows) -> np.ndarray:
        """(len(rows),) the rows' z_i of eq. (18) (float32)."""
        r = jnp.asarray(self._rows(rows))
        return np.asarray(_common_factor(r, jnp.asarray(self.keys)))

    def targets(self, rows=slice(None)) -> np.ndarray:
        """Labels of eq. (17) on ``rows``: 1 where Σ_{j≤k*} x_{i,10j} > 0, else 0.

        The sum runs in float64 over the float32 entries, one row at a time, so a row's label does
        not depend on the block it is asked in. With ``label_noise`` = p, a row whose hashed uniform
        is < p gets the label of a fair hashed coin instead.

        Args:
          rows: a slice or a 1-D integer array of row numbers.

        Returns:
          (len(rows),) int32 numpy array of {0, 1}.
        """
        r = self._rows(rows)
        if self.n_informative == 0:
            y = np.zeros(r.shape[0], dtype=np.int32)
        else:
            true_x = np.asarray(self.block(r, self.true_features), dtype=np.float64)
            y = (np.sum(true_x, axis=1) > 0).astype(np.int32)
        if self.label_noise > 0:
            rr = jnp.asarray(r)
            keys = jnp.asarray(self.keys)
            u = np.asarray(_uniform24(_mix(_row_keys(rr, keys[0] ^ _U32(_STREAM_NOISE)) ^ keys[1])))
            coin = np.asarray(_mix(_row_keys(rr, keys[0] ^ _U32(_STREAM_FLIP)) ^ keys[1])) >> np.uint32(31)
            y = np.where(u < self.label_noise, coin.astype(np.int32), y)
        return y

    def materialize(self, rows=slice(None), cols=None) -> np.ndarray:
        """The dense block rows × cols as a host numpy array, generated in blocks of ≈ 64 MB.

        For data that fit in memory (``nbytes`` says how much the whole X takes).
        """
        r, c = self._rows(rows), self._cols(cols)
        out = np.empty((r.shape[0], c.shape[0]), dtype=self.dtype)
        if out.size == 0:
            return out
        step = max(1, MATERIALIZE_BLOCK_BYTES // max(1, c.shape[0] * self.dtype.itemsize))
        for start in range(0, r.shape[0], step):
            out[start : start + step] = np.asarray(self.block(r[start : start + step], c))
        return out

    # ------------------------------------------------------------------ fused products
    def matvec_block(self, row_start, n_rows: int, cols, v) -> jax.Array:
        """``X[row_start:row_start+n_rows, cols] @ v`` with the entries generated in the kernel.

        Rows at or past N give 0 (so the last block of a fixed ``n_rows`` may overhang). Compiled
        once per (n_rows, len(cols), dtype); ``row_start`` is a traced scalar.

        Args:
          row_start: first row (int or int32 scalar).
          n_rows: static number of rows of the block (≥ 1).
          cols: 1-D integer array of the columns (m,).
          v: (m,) vector (its dtype is the product's).

        Returns:
          (n_rows,) ``jax.Array``.
        """
        n_rows = check_int(n_rows, "n_rows", low=1)
        c = self._kernel_cols(cols)
        v = self._column_vector(v, c)
        return _kernel("matvec")(
            jnp.asarray(row_start, jnp.int32), jnp.int32(self.shape[0]), c, v, jnp.asarray(self.keys),
            self._alpha(), n_rows=n_rows,
        )

    def rmatvec_block(self, row_start, n_rows: int, cols, u) -> jax.Array:
        """``u @ X[row_start:row_start+n_rows, cols]`` with the entries generated in the kernel.

        Rows at or past N contribute nothing. Compiled once per (n_rows, len(cols), dtype).

        Args:
          row_start: first row (int or int32 scalar).
          n_rows: static number of rows of the block (≥ 1).
          cols: 1-D integer array of the columns (m,).
          u: (n_rows,) row weights.

        Returns:
          (m,) ``jax.Array``.
        """
        n_rows = check_int(n_rows, "n_rows", low=1)
        c = self._kernel_cols(cols)
        u = jnp.asarray(u, dtype=self.dtype)
        if u.shape != (n_rows,):
            raise ValueError(f"u must have shape ({n_rows},) (one entry per row of the block); got {u.shape}")
        return _kernel("rmatvec")(
            jnp.asarray(row_start, jnp.int32), jnp.int32(self.shape[0]), c, u, jnp.asarray(self.keys),
            self._alpha(), n_rows=n_rows,
        )

    def gradient_block(self, row_start, n_rows: int, cols, v, fn) -> tuple[jax.Array, jax.Array]:
        """Scores and gradient of one row block in one pass: each entry generated once.

        With ``X_b = X[row_start:row_start+n_rows, cols]``: ``s = X_b @ v`` (raw, unstandardised
        scores), ``u = fn(s, rows)`` and ``g = u @ X_b``. The rows are processed one cache-sized
        tile at a time (:data:`TILE_ENTRIES` entries): the tile is generated, multiplied by ``v``,
        weighted by ``fn`` and multiplied back, so no more than one tile is ever materialised.

        Rows at or past N (the overhang of a last block of fixed ``n_rows``) get ``s = 0`` and
        contribute nothing to ``g`` (their weight is replaced by 0 whatever ``fn`` returns, NaN
        included). ``fn`` sees them, and the padding rows of the last tile (row numbers up to
        ``row_start + n_rows + R − 1``), so per-row data it indexes by row number must tolerate
        out-of-range indices (``jnp.clip`` them, or rely on JAX's clamped gathers).

        ``fn`` is a pytree argument: a :class:`jax.tree_util.Partial` whose arrays (targets, an
        offset, weights, …) are traced leaves and whose function is static, so one compiled kernel
        serves every call with new data of the same shapes. A plain function is taken as
        ``Partial(fn)``: compiled once per function object (pass the same one, not a fresh lambda).
        Compiled once per (n_rows, len(cols), dtype, fn's function and leaf shapes); ``row_start``
        is traced.

        Args:
          row_start: first row (int or int32 scalar).
          n_rows: static number of rows of the block (≥ 1).
          cols: 1-D integer array of the columns (m,), any subset, any order, repeats allowed
            (checked against M on the host; a traced array inside ``jax.jit`` is not checked).
          v: (m,) coefficients (its dtype is the products').
          fn: jax-traceable ``fn(s, rows) -> u``, pointwise per row: ``s`` (R,) scores of a tile of
            R rows, ``rows`` (R,) int32 their global row numbers (``row_start + offset``, so ``fn``
            can index per-row data such as targets by them); returns (R,) weights. A
            ``Partial(f, *data)`` calls ``f(*data, s, rows)``.

        Returns:
          ``(s, g)``: s (n_rows,) scores, g (m,) the weighted column sums ``u @ X_b``.

        >>> import jax, numpy as np, jax.numpy as jnp, jaxselect as js
        >>> src = js.datasets.equicorrelated(1000, 200, n_informative=5, seed=1)
        >>> def weights(c, s, rows):  # one function object, c a traced leaf: compiled once
        ...     return jnp.tanh(s - c)
        >>> cols, v = np.array([3, 7]), np.array([1.0, -1.0], np.float32)
        >>> Xb = np.asarray(src.block(slice(100, 150), cols), np.float64)
        >>> for c in (0.0, 0.5):
        ...     s, g = src.gradient_block(100, 50, cols, v, jax.tree_util.Partial(weights, jnp.float32(c)))
        ...     print(np.allclose(s, Xb @ v, atol=1e-5) and np.allclose(g, np.tanh(Xb @ v - c) @ Xb, atol=1e-4))
        True
        True
        """
        n_rows = check_int(n_rows, "n_rows", low=1)
        if not callable(fn):
            raise TypeError(f"fn must be a callable fn(s, rows) -> weights; got {type(fn).__name__}")
        if not isinstance(fn, jax.tree_util.Partial):
            fn = jax.tree_util.Partial(fn)
        c = self._kernel_cols(cols)
        v = self._column_vector(v, c)
        return _kernel("gradient")(
            jnp.asarray(row_start, jnp.int32), jnp.int32(self.shape[0]), c, v, jnp.asarray(self.keys),
            self._alpha(), fn, n_rows=n_rows,
        )

    def moments_block(self, row_start, n_rows: int, cols) -> tuple[jax.Array, jax.Array]:
        """Column sums ``Σ_i x_ij`` and ``Σ_i x_ij²`` over a row block, each entry generated once.

        The pass of a standardisation (column means and variances) without materialising the
        block: one cache-sized tile at a time, as :meth:`gradient_block`. Rows at or past N count
        for nothing. Compiled once per (n_rows, len(cols), dtype); ``row_start`` is traced.

        Args:
          row_start: first row (int or int32 scalar).
          n_rows: static number of rows of the block (≥ 1).
          cols: 1-D integer array of the columns (m,).

        Returns:
          ``(sums, sums_of_squares)``, each (m,) of :attr:`dtype`.

        >>> import numpy as np, jaxselect as js
        >>> src = js.datasets.equicorrelated(1000, 200, n_informative=5, seed=1)
        >>> s1, s2 = src.moments_block(0, 1000, np.arange(200))
        >>> X = np.asarray(src.block(slice(None)), np.float64)
        >>> bool(np.allclose(s1, X.sum(0), atol=1e-2) and np.allclose(s2, (X * X).sum(0), rtol=1e-5))
        True
        """
        n_rows = check_int(n_rows, "n_rows", low=1)
        c = self._kernel_cols(cols)
        return _kernel("moments")(
            jnp.asarray(row_start, jnp.int32), jnp.int32(self.shape[0]), c, jnp.asarray(self.keys),
            self._alpha(), n_rows=n_rows, dtype=self.dtype,
        )


    def summary_block(self, row_start, n_rows: int, cols, weights=None):
        """The statistics of a standardisation pass over a row block, each entry generated once.

        ``(lo, hi, total, mean, m2)``: per column the minimum and maximum over rows of positive
        weight, ``Σ_i w_i``, the weighted mean and ``Σ_i w_i (x_ij − mean_j)²`` (sums taken on the
        entries minus the block's first row, so the variance does not cancel when the mean is
        large against the spread). Rows at or past N weigh 0. One cache-sized tile at a time, as
        :meth:`gradient_block`; compiled once per (n_rows, len(cols), dtype).

        Args:
          row_start: first row (int or int32 scalar).
          n_rows: static number of rows of the block (≥ 1).
          cols: 1-D integer array of the columns (m,).
          weights: (n_rows,) non-negative row weights (host array), or None (all 1).

        >>> import numpy as np, jaxselect as js
        >>> src = js.datasets.equicorrelated(1000, 200, n_informative=5, seed=1)
        >>> lo, hi, total, mean, m2 = src.summary_block(0, 1000, np.arange(200))
        >>> X = np.asarray(src.block(slice(None)), np.float64)
        >>> bool(np.allclose(mean, X.mean(0), atol=1e-5) and np.allclose(m2, ((X - X.mean(0)) ** 2).sum(0), rtol=1e-4))
        True
        >>> bool(np.array_equal(lo, X.min(0)) and np.array_equal(hi, X.max(0)) and float(total) == 1000.0)
        True
        """
        n_rows = check_int(n_rows, "n_rows", low=1)
        c = self._kernel_cols(cols)
        w = np.ones(n_rows, self.dtype) if weights is None else np.asarray(weights, self.dtype)
        if w.shape != (n_rows,):
            raise ValueError(f"weights must have shape ({n_rows},) (one per row of the block); got {w.shape}")
        start = check_int(row_start, "row_start", low=0)
        masked = bool(start + n_rows > self.shape[0] or not (w > 0).all())
        return _kernel("summary")(
            jnp.int32(start), jnp.int32(self.shape[0]), c, jnp.asarray(w), jnp.asarray(self.keys),
            self._alpha(), n_rows=n_rows, dtype=self.dtype, masked=masked,
        )


def _uniform24(h: jax.Array) -> jax.Array:
    """float32 uniform in [0, 1) from the top 24 bits."""
    return (h >> _U32(8)).astype(jnp.float32) * jnp.float32(2.0**-24)
