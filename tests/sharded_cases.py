"""Sharded-vs-unsharded cases (run by test_sharding.py with 4 fake CPU devices; not collected alone).

Each case runs a public solver on row-sharded inputs and on plain single-device inputs and asserts
identical orders / labels and values to tolerance, on every kind of mesh (``MESHES``):

* ``auto``: :func:`jaxselect.data_mesh` (a ``jax.sharding.Mesh``, Auto axes), N rows split evenly;
* ``explicit``: ``jax.make_mesh`` (Explicit axes, JAX's default), N rows (and every solver once
  more inside ``jax.set_mesh(mesh)``, test_inside_set_mesh);
* ``padded`` (some cases, DWSM included): ``jax.make_mesh``, N − 1 rows padded to N by
  :func:`jaxselect.shard_rows` and solved with ``sample_weight=w``, against the N − 1 rows
  unpadded. (The multi-process test pads ``prepare`` + ``cs_fr``, ``glm_omp``, ``greedy_rls`` and
  ``fsa``.)

Explicit inputs run with the compiled code of the Auto mesh (``jaxselect.sharding.any_mesh``), so
the explicit kinds cost no new compiles. test_sharding.py inspects the HLO dumped while these run
for all-gathers of the (N, ·) inputs, so the check covers both axis types.
"""

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxselect as js
from jaxselect.rls.selection import rls_predict

N = 104  # rows; keep in sync with test_sharding.N_ROWS
N_DEV = 4
MESHES = ["auto", "explicit"]
EXPLICIT = jax.sharding.AxisType.Explicit
pytestmark = pytest.mark.skipif(
    jax.device_count() < N_DEV, reason="needs XLA_FLAGS=--xla_force_host_platform_device_count=4"
)


def regression_data(d=12, T=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, d)) + rng.normal(size=d) * 3
    Y = X[:, [1, 4, 7]] @ rng.normal(size=(3, T)) + 0.5 * rng.normal(size=(N, T))
    return X, Y


def close(a, b, rtol=2e-4, atol=1e-5):
    """float32 (the default): row sums split over devices round differently than on one device."""
    if isinstance(a, js.SelectionPath):  # path.info: solver diagnostics (iterations) stop anywhere within tol
        a, b = a._replace(info=None), b._replace(info=None)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


class Placed:
    """The data of one case on one kind of mesh.

    ``ref``: the single-device arrays (N rows for ``auto``, N − 1 for the explicit kinds);
    ``sharded``: the row-sharded arrays (N rows; padded for the explicit kinds); ``w``: None or the
    row weights of the padding.
    """

    def __init__(self, kind, *arrays):
        self.kind = kind
        self.mesh = js.data_mesh() if kind == "auto" else jax.make_mesh((N_DEV,), ("data",))
        assert self.mesh.axis_types == ((jax.sharding.AxisType.Auto,) if kind == "auto" else (EXPLICIT,))
        if kind != "padded":
            self.ref = tuple(arrays)
            self.sharded = tuple(js.shard_rows(a, mesh=self.mesh) for a in arrays)
            self.w = None
        else:
            self.ref = tuple(a[: N - 1] for a in arrays)
            *self.sharded, self.w = js.shard_rows(*self.ref, mesh=self.mesh)
            assert self.w.shape == (N,) and float(self.w.sum()) == N - 1

    def context(self):
        return contextlib.nullcontext()


@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_design_operator(kind):
    """The data layer's DenseDesign on row-sharded X (mv, rmv, Gram, lazy Gram columns) equals the
    single-device operator; ``shard`` pads N − 1 rows with weight-0 rows that change nothing."""
    from jaxselect.design import DenseDesign, column_summary
    from jaxselect.sharding import any_mesh

    X, _ = regression_data()
    X = X.astype(np.float32)
    mesh = js.data_mesh() if kind == "auto" else jax.make_mesh((N_DEV,), ("data",))
    ref = DenseDesign.from_summary(jnp.asarray(X), column_summary(X))
    sharded = DenseDesign.from_summary(js.shard_rows(X, mesh=mesh), column_summary(X))
    rng = np.random.default_rng(3)
    v = jnp.asarray(rng.normal(size=X.shape[1]), jnp.float32)
    u = jnp.asarray(rng.normal(size=N), jnp.float32)
    idx = jnp.asarray([3, 0, 7])

    @any_mesh
    def ops(op, v, u):
        return op.mv(v), op.rmv(u), op.gram(), op.gram_columns(idx)

    close(ops(sharded, v, js.shard_rows(u, mesh=mesh)), ops(ref, v, u))
    padded, w = DenseDesign.from_summary(jnp.asarray(X[: N - 1]), column_summary(X[: N - 1])).shard(mesh)
    assert padded.X.shape == (N, X.shape[1]) and float(w.sum()) == N - 1
    small = DenseDesign.from_summary(jnp.asarray(X[: N - 1]), column_summary(X[: N - 1]))

    @any_mesh
    def weighted_gram(op, w):
        return op.gram(w), op.gram_columns(idx, w)

    close(weighted_gram(padded, w), (small.gram(), small.gram_columns(idx)))


def test_shard_rows_places_rows_on_every_device():
    X, _ = regression_data()
    Xs = js.shard_rows(X)
    assert len(Xs.sharding.device_set) == N_DEV
    assert {s.data.shape for s in Xs.addressable_shards} == {(N // N_DEV, 12)}
    with pytest.raises(ValueError, match="evenly"):
        js.shard_rows(np.zeros((10, 3)))
    with pytest.raises(ValueError, match="no axis"):
        js.shard_rows(np.zeros((8, 3)), mesh=js.data_mesh(), axis="model")


@pytest.mark.parametrize("mesh", ["data_mesh", "make_mesh", "make_mesh-auto"])
def test_shard_rows_pads_any_n(mesh):
    mesh = {
        "data_mesh": js.data_mesh(),
        "make_mesh": jax.make_mesh((N_DEV,), ("data",)),
        "make_mesh-auto": jax.make_mesh((N_DEV,), ("data",), axis_types=(jax.sharding.AxisType.Auto,)),
    }[mesh]
    X = np.arange(30.0, dtype=np.float32).reshape(10, 3)
    labels = np.array([-1, 1] * 5)
    Xs, ls, w = js.shard_rows(X, labels, mesh=mesh)
    assert Xs.shape == (12, 3) and ls.shape == w.shape == (12,)
    assert Xs.sharding.mesh == mesh and {s.data.shape for s in Xs.addressable_shards} == {(3, 3)}
    np.testing.assert_array_equal(np.asarray(w), [1.0] * 10 + [0.0] * 2)
    np.testing.assert_array_equal(np.asarray(Xs)[10:], X[[9, 9]])  # padding repeats the last row
    assert set(np.asarray(ls).tolist()) == {-1, 1}  # labels stay valid labels
    Xs, w = js.shard_rows(X, mesh=mesh, weights=True)
    assert Xs.shape == (12, 3) and float(w.sum()) == 10
    with pytest.raises(ValueError, match="weights=True"):
        js.shard_rows(X, mesh=mesh)


@pytest.mark.parametrize("kind", MESHES)
@pytest.mark.parametrize(
    "gram, offset", [(True, 0.0), (True, 1e4), (False, 0.0)], ids=["gram-raw", "gram-centred-copy", "gram-free"]
)
def test_sequencing(gram, offset, kind):
    """Both Gram branches of prepare (XᵀX − nμμᵀ for small offsets, the centred copy for large)."""
    X, Y = regression_data()
    X = X + offset
    groups = js.Groups.from_ids(np.arange(12) // 2, np.linspace(1, 3, 6))
    p = Placed(kind, X, Y)
    X, Y = map(jnp.asarray, p.ref)  # the same (XLA) moments kernel on one device; numpy X
    # takes the host kernel, compared with XLA in test_moments.py
    for solver in (js.cs_omp, js.cs_fr, js.doubling):
        a = solver(js.prepare(X, Y, groups, gram=gram))
        with p.context():
            b = solver(js.prepare(*p.sharded, groups, gram=gram, sample_weight=p.w))
        assert a.order.tolist() == b.order.tolist()
        # float32 XᵀX − nμμᵀ summed over 4 devices: coefficients of ~0.04 agree to ~3e-5
        close(a, b, atol=5e-5)


@pytest.mark.parametrize("kind", MESHES + ["padded"])
def test_group_lasso_path(kind):
    X, Y = regression_data(seed=1)
    groups = js.Groups.from_ids(np.arange(12) // 3, [1.0, 2.0, 1.0, 3.0])
    p = Placed(kind, X, Y)
    a = js.group_lasso_path(js.prepare(*map(jnp.asarray, p.ref), groups), n_lambdas=8)
    with p.context():
        b = js.group_lasso_path(js.prepare(*p.sharded, groups, sample_weight=p.w), n_lambdas=8)
    assert a.order.tolist() == b.order.tolist()
    close(a, b, rtol=2e-3, atol=2e-4)  # float32 BCD stops anywhere within its KKT tolerance (1e-5·λ_max)


@pytest.mark.parametrize("kind", MESHES)
@pytest.mark.parametrize("loss, solver", [("logistic", "auto"), ("softmax", "cholesky"), ("softmax", "cg")])
def test_glm_omp(loss, solver, kind):
    X, Y = regression_data(seed=2)
    y = (
        (Y[:, 0] > np.median(Y[:, 0])).astype(int)
        if loss == "logistic"
        else np.digitize(Y[:, 0], np.quantile(Y[:, 0], [0.33, 0.66]))
    )
    groups = np.arange(12) // 2
    # float64: the Newton refits stop anywhere within their tolerance, so in float32 a reordered
    # (sharded) reduction moves the models by up to ~tol; float64 makes the comparison sharp.
    with jax.enable_x64():
        p = Placed(kind, X, y)
        a = js.glm_omp(*p.ref, groups, loss=loss, k=4, newton_solver=solver)
        with p.context():
            b = js.glm_omp(*p.sharded, groups, loss=loss, k=4, newton_solver=solver, sample_weight=p.w)
        assert a.coef.dtype == np.float64 and int(a.status) == int(b.status) == 0
        assert a.order.tolist() == b.order.tolist()
        close(a, b, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("kind", MESHES)
def test_greedy_rls(kind):
    X, Y = regression_data(seed=3)
    p = Placed(kind, X, Y)
    n = p.ref[0].shape[0]
    a = js.greedy_rls(*p.ref, 5, l2=0.5 / n, bias=1.0)  # RLScore regparam 0.5
    with p.context():
        b = js.greedy_rls(*p.sharded, 5, l2=0.5 / n, bias=1.0, sample_weight=p.w)
        pb = rls_predict(b, p.sharded[0])
    assert a.selected.tolist() == b.selected.tolist()
    close(a, b, rtol=1e-4, atol=1e-4)  # float32: row sums split over devices round differently
    close(rls_predict(a, p.ref[0]), np.asarray(pb)[: p.ref[0].shape[0]], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kind", ["auto", "padded"])
def test_dwsm(kind):
    """N rows on Auto axes; N − 1 rows padded on Explicit axes with sample_weight (the padding rows
    come last, and JAX's default partitionable random draws are the same for the real rows)."""
    X, _ = regression_data(seed=4)
    X = X[:, :5]
    y = (X[:, 0] + 0.3 * X[:, 1] > np.median(X[:, 0] + 0.3 * X[:, 1])).astype(int)
    p = Placed(kind, X, y)
    kw = dict(lam=0.05, n_iter=2, states_per_example=2)
    a = js.dwsm_fit(jax.random.key(0), *p.ref, **kw)
    b = js.dwsm_fit(jax.random.key(0), *p.sharded, sample_weight=p.w, **kw)
    close(a.theta, b.theta)
    close(a.train_loss, b.train_loss)
    la, za = js.predict(a, p.ref[0])
    lb, zb = js.predict(b, p.sharded[0])
    n = p.ref[0].shape[0]
    np.testing.assert_array_equal(np.asarray(la), np.asarray(lb)[:n])
    np.testing.assert_array_equal(np.asarray(za), np.asarray(zb)[:n])


@pytest.mark.parametrize("kind", MESHES)
@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_fsa(loss, kind):
    rng = np.random.default_rng(6)
    X = rng.standard_normal((N, 16))
    y = X[:, 4] - 2 * X[:, 11] + 0.1 * rng.standard_normal(N)
    if loss == "logistic":
        # labels with noise: on separable labels the logistic minimiser is at infinity and the
        # polish stops anywhere along that ray within its tolerance (coefficients of ~10³ whose
        # last digits depend on rounding)
        y = (X[:, 4] - 2 * X[:, 11] + rng.standard_normal(N) > 0).astype(float)
    p = Placed(kind, X, y)
    a = js.fsa(*p.ref, 2, loss=loss, n_iter=20)
    with p.context():
        b = js.fsa(*p.sharded, 2, loss=loss, n_iter=20, sample_weight=p.w)
        pb = js.predict(b, p.sharded[0])
    assert a.support.tolist() == b.support.tolist() == [4, 11]
    close(a.coef, b.coef)
    close(js.predict(a, p.ref[0]), np.asarray(pb)[: p.ref[0].shape[0]])


@pytest.mark.parametrize("kind", MESHES + ["padded"])
def test_refits_and_their_gradients(kind):
    X, Y = regression_data(seed=5)
    p = Placed(kind, X, Y)
    (Xr, Yr), (Xs, Ys), w = p.ref, p.sharded, p.w
    support = np.arange(12) % 3 == 0
    sel = np.array([1, 4, 7])
    labels = (Yr[:, 0] > np.median(Yr[:, 0])).astype(int)
    with p.context():
        ls = labels if w is None else js.shard_rows(labels, mesh=p.mesh, weights=True)[0]
        close(js.ridge_refit(Xr, Yr, support, l2=0.1), js.ridge_refit(Xs, Ys, support, l2=0.1, sample_weight=w))
        if kind in ("auto", "padded"):
            # padded: inside a jit the Explicit inputs are traced; any_mesh runs under auto_axes
            g = jax.jit(jax.grad(lambda X, w: jnp.sum(js.ridge_refit(X, Ys, support, l2=0.1, sample_weight=w)[0])))
            gr = jax.grad(lambda X: jnp.sum(js.ridge_refit(X, Yr, support, l2=0.1)[0]))(jnp.asarray(Xr))
            close(gr, np.asarray(g(Xs, w))[: Xr.shape[0]])
        close(js.rls_refit(Xr, Yr, sel, l2=0.5, bias=1.0), js.rls_refit(Xs, Ys, sel, l2=0.5, bias=1.0, sample_weight=w))
        close(js.glm_refit(Xr, labels, support, l2=0.1)[:2], js.glm_refit(Xs, ls, support, l2=0.1, sample_weight=w)[:2])


@pytest.mark.parametrize("mesh", ["Mesh", "make_mesh-auto", "make_mesh"])
def test_every_way_to_build_the_mesh(mesh):
    """prepare + cs_fr and greedy_rls on three ways of making a mesh (N rows; set_mesh: test_inside_set_mesh)."""
    X, Y = regression_data(seed=7)
    groups = js.Groups.from_ids(np.arange(12) // 2, np.linspace(1, 3, 6))  # test_sequencing's: compiled once
    auto = (jax.sharding.AxisType.Auto,)
    m = {
        "Mesh": jax.sharding.Mesh(np.array(jax.devices()), ("data",)),
        "make_mesh-auto": jax.make_mesh((N_DEV,), ("data",), axis_types=auto),
    }.get(mesh) or jax.make_mesh((N_DEV,), ("data",))
    Xs, Ys = js.shard_rows(X, mesh=m), js.shard_rows(Y, mesh=m)
    a = js.cs_fr(js.prepare(jnp.asarray(X), jnp.asarray(Y), groups))
    r = js.greedy_rls(X, Y, 5, l2=0.5 / N, bias=1.0)
    b = js.cs_fr(js.prepare(Xs, Ys, groups))
    s = js.greedy_rls(Xs, Ys, 5, l2=0.5 / N, bias=1.0)
    assert a.order.tolist() == b.order.tolist() and r.selected.tolist() == s.selected.tolist()
    close(a, b, rtol=2e-4, atol=1e-4)
    close(r, s, rtol=1e-4, atol=1e-4)
    if mesh == "make_mesh":  # outputs come back on the caller's Explicit mesh
        assert b.coef.sharding.mesh.axis_types == (jax.sharding.AxisType.Explicit,)


def test_inside_set_mesh():
    """The solvers called inside ``jax.set_mesh`` of an Explicit mesh (N rows). The context is
    lifted for the call exactly (``sharding._no_mesh``), so group_lasso_path and dwsm_fit, with the
    shapes and options of their own cases above, reuse those cases' compiled programs."""
    mesh = jax.make_mesh((N_DEV,), ("data",))
    X, Y = regression_data(seed=8)
    y = Y[:, 0]
    labels = (y > np.median(y)).astype(int)
    groups = js.Groups.from_ids(np.arange(12) // 2, np.linspace(1, 3, 6))
    Xs, Ys, ys, ls = (js.shard_rows(a, mesh=mesh) for a in (X, Y, y, labels))
    Xj, Yj = jnp.asarray(X), jnp.asarray(Y)
    support = np.arange(12) % 3 == 0
    ref = {
        "cs_fr": js.cs_fr(js.prepare(Xj, Yj, groups)),
        "glm_omp": js.glm_omp(X, labels, groups, k=3),
        "greedy_rls": js.greedy_rls(X, Y, 5, l2=0.5 / N, bias=1.0),
        "fsa": js.fsa(X, y, 2, n_iter=20),
        "ridge_refit": js.ridge_refit(X, Y, support, l2=0.1),
    }
    # the data, groups and options of test_group_lasso_path and test_dwsm (their programs are reused)
    Xl, Yl = regression_data(seed=1)
    lasso_groups = js.Groups.from_ids(np.arange(12) // 3, [1.0, 2.0, 1.0, 3.0])
    Xd = regression_data(seed=4)[0][:, :5]
    yd = (Xd[:, 0] + 0.3 * Xd[:, 1] > np.median(Xd[:, 0] + 0.3 * Xd[:, 1])).astype(int)
    dwsm_kw = dict(lam=0.05, n_iter=2, states_per_example=2)
    ref["group_lasso_path"] = js.group_lasso_path(
        js.prepare(jnp.asarray(Xl), jnp.asarray(Yl), lasso_groups), n_lambdas=8
    )
    ref["dwsm_fit"] = js.dwsm_fit(jax.random.key(0), Xd, yd, **dwsm_kw).theta
    Xls, Yls, Xds = (js.shard_rows(a, mesh=mesh) for a in (Xl, Yl, Xd))
    with jax.set_mesh(mesh):
        got_lasso = js.group_lasso_path(js.prepare(Xls, Yls, lasso_groups), n_lambdas=8)
        got_dwsm = js.dwsm_fit(jax.random.key(0), Xds, yd, **dwsm_kw).theta
        got = {
            "cs_fr": js.cs_fr(js.prepare(Xs, Ys, groups)),
            "glm_omp": js.glm_omp(Xs, ls, groups, k=3),
            "greedy_rls": js.greedy_rls(Xs, Ys, 5, l2=0.5 / N, bias=1.0),
            "fsa": js.fsa(Xs, ys, 2, n_iter=20),
            "ridge_refit": js.ridge_refit(Xs, Ys, support, l2=0.1),
            "group_lasso_path": got_lasso,
            "dwsm_fit": got_dwsm,
        }
    for name in ref:
        close(ref[name], got[name], rtol=2e-3, atol=2e-4)  # float32 split sums; glm's Newton within tol
    assert got["cs_fr"].coef.sharding.mesh.axis_types == (EXPLICIT,)  # outputs on the caller's mesh


def test_cross_validation():
    """cross_validate_path (fold weights on row-sharded X) and cross_validate_fsa (gathered fold rows)
    on an Explicit mesh, inside ``jax.set_mesh`` (which also relabels the inputs, as a plain call
    does), give the single-device CV curves. Before any_mesh, FSA's fold gather raised there."""
    mesh = jax.make_mesh((N_DEV,), ("data",))
    X, Y = regression_data(seed=9)
    X, y = X[:, :6], Y[:, 0]
    Xs, ys = js.shard_rows(X, mesh=mesh), js.shard_rows(y, mesh=mesh)
    path_kw, fsa_kw = {"folds": 4, "k": 2}, {"folds": 4, "n_iter": 10}
    ref_path, ref_fsa = js.cross_validate_path(X, y, **path_kw), js.cross_validate_fsa(X, y, [2], **fsa_kw)
    with jax.set_mesh(mesh):
        path, fsa = js.cross_validate_path(Xs, ys, **path_kw), js.cross_validate_fsa(Xs, ys, [2], **fsa_kw)
    assert path.fold_order.tolist() == ref_path.fold_order.tolist() and path.grid.tolist() == ref_path.grid.tolist()
    assert path.best == ref_path.best and path.status == fsa.status == 0
    close(path.fold_path_scores, ref_path.fold_path_scores, rtol=1e-4, atol=1e-5)
    close(fsa.scores, ref_fsa.scores, rtol=1e-4, atol=1e-5)
    assert fsa.best == ref_fsa.best
