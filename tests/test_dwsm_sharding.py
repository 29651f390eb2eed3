"""DWSM with a row-sharded X on 4 fake CPU devices gives the same policy as unsharded X.

Runs in its own process because the device count must be set before jax is imported.
"""

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import os
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_enable_x64", True)
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    from jaxselect.sequential import dwsm_fit, dwsm_predict
    assert len(jax.devices()) == 4
    rng = np.random.default_rng(0)
    X = rng.normal(size=(32, 4)); y = (X[:, 0] + 0.3 * X[:, 1] > 0).astype(int)
    mesh = Mesh(np.array(jax.devices()), ("rows",))
    Xs = jax.device_put(jnp.asarray(X), NamedSharding(mesh, P("rows", None)))
    kw = dict(lam=0.05, n_iter=2, states_per_example=2)
    a = dwsm_fit(jax.random.key(0), X, y, **kw)
    b = dwsm_fit(jax.random.key(0), Xs, y, **kw)
    np.testing.assert_allclose(np.asarray(a.theta), np.asarray(b.theta), rtol=1e-8, atol=1e-10)
    la, za = dwsm_predict(a, X)
    lb, zb = dwsm_predict(b, Xs)
    np.testing.assert_array_equal(np.asarray(la), np.asarray(lb))
    np.testing.assert_array_equal(np.asarray(za), np.asarray(zb))
    print("OK")
    """
)


def test_row_sharded_X_matches_unsharded():
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "OK" in out.stdout
