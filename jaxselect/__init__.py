"""jaxselect: JIT-compiled functional JAX feature selection under budgets."""

__version__ = "0.1.0"
