"""Tune the ridge constant of a selected model by gradient descent on a validation loss.

Selection is piecewise constant, so we differentiate the *fit at a fixed support*: CS-G-FR picks
the columns of Pima that fit in a 5 CAD budget, then ``jaxselect.ridge_refit`` — whose linear solve
is differentiated implicitly — is tuned in log λ with optax's Adam on the validation error.
Run: python examples/tune_l2.py (about 20 s on 2 CPU cores, compilation included).
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax

import jaxselect as js


def main():
    data = js.datasets.load_pima()
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(data.y))
    tr, va = perm[:400], perm[400:]
    X, y = data.X, data.y.astype(np.float64)
    path = js.cs_fr(js.prepare(X[tr], y[tr], js.Groups.from_ids(data.groups, data.costs)))
    k = int(np.sum(np.asarray(path.cum_cost) <= 5.0))
    support = np.asarray(path.coef[k - 1, :, 0]) != 0
    print("features within 5 CAD:", [data.feature_names[f] for f in np.flatnonzero(support)])

    Xt, yt, Xv, yv = (jnp.asarray(a, jnp.float32) for a in (X[tr], y[tr], X[va], y[va]))

    def val_loss(log_l2):
        coef, b = js.ridge_refit(Xt, yt, support, l2=jnp.exp(log_l2))
        return jnp.mean((Xv @ coef + b - yv) ** 2)

    opt = optax.adam(0.3)
    params = jnp.asarray(np.log(100.0), jnp.float32)  # start heavily regularised
    state = opt.init(params)

    @jax.jit
    def step(params, state):
        value, grad = jax.value_and_grad(val_loss)(params)
        updates, state = opt.update(grad, state)
        return optax.apply_updates(params, updates), state, value

    for i in range(60):
        params, state, value = step(params, state)
        if i % 10 == 0:
            print(f"step {i:2d}  l2 = {float(jnp.exp(params)):9.4g}  validation MSE = {float(value):.4f}")
    print(f"final l2 = {float(jnp.exp(params)):.4g}, validation MSE = {float(val_loss(params)):.4f}")


if __name__ == "__main__":
    main()
