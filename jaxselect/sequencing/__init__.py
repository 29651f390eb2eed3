"""Anytime linear prediction by feature-group sequencing (Hu, Grubb, Bagnell et al.).

* :mod:`~jaxselect.sequencing.prepare` — standardised, group-whitened :class:`Problem` from data;
* :mod:`~jaxselect.sequencing.streaming` — the same problem from row batches;
* :mod:`~jaxselect.sequencing.engine` — the shared engine that appends groups to a whitened fit;
* :mod:`~jaxselect.sequencing.criteria`, :mod:`~jaxselect.sequencing.rules` — CS-G-OMP (and its
  variants), CS-G-FR, Doubling;
* :mod:`~jaxselect.sequencing.glm` — GLM / multi-output cost-sensitive group OMP (Alg. 3);
* :mod:`~jaxselect.sequencing.group_lasso` — the cost-weighted group lasso baseline;
* :mod:`~jaxselect.sequencing.anytime`, :mod:`~jaxselect.sequencing.glm_eval` — anytime
  evaluation: predictions at a budget, objective-vs-cost curves, timeliness, the oracle curve.
"""

from jaxselect.sequencing.glm import (
    GLM_LOSSES,
    GLMConfig,
    GLMInfo,
    GLMOMPState,
    GLMProblem,
    GLMStepInfo,
    NewtonOptions,
    glm_omp,
    glm_omp_init,
    glm_omp_run,
    glm_omp_solver,
    glm_omp_step,
    glm_prepare,
    glm_problem,
)
from jaxselect.sequencing.engine import as_rule
from jaxselect.sequencing.rules import (
    Rule,
    RuleParams,
    SequencingConfig,
    SequencingState,
    StepInfo,
    cs_fr,
    cs_omp,
    doubling,
    doubling_rule,
    fixed_order_path,
    fixed_order_rule,
    fr_rule,
    omp_rule,
    rule_params,
    sequencing_init,
    sequencing_run,
    sequencing_solver,
    sequencing_step,
)

__all__ = [
    "Rule",
    "as_rule",
    "sequencing_solver",
    "glm_omp_solver",
    "glm_prepare",
    "NewtonOptions",
    "SequencingState",
    "SequencingConfig",
    "StepInfo",
    "RuleParams",
    "rule_params",
    "sequencing_init",
    "sequencing_step",
    "sequencing_run",
    "omp_rule",
    "fr_rule",
    "doubling_rule",
    "fixed_order_rule",
    "cs_omp",
    "cs_fr",
    "doubling",
    "fixed_order_path",
    "glm_omp",
    "GLMInfo",
    "GLM_LOSSES",
    "GLMProblem",
    "GLMConfig",
    "GLMOMPState",
    "GLMStepInfo",
    "glm_problem",
    "glm_omp_init",
    "glm_omp_step",
    "glm_omp_run",
]

# js.predict: register this family's result type (GroupLassoFit) with the single-dispatch predict
from jaxselect.sequencing import predictor as _predictor  # noqa: E402, F401
