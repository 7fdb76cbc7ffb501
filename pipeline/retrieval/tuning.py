"""A search's own fusion knobs (`fusion` on the request) resolved against the wired values.

Every knob defaults to the engine's wired value (`EngineConfig`, `PprConfig`), so a request
that names none, or names the wired values, ranks exactly as the default. The bounds keep a
request's cost and meaning sane: a weight is a channel's vote (0 leaves the channel out and it
is not asked at all), RRF's k flattens or sharpens the rank curve, PPR's damping is the walk's
restart probability's complement. None of them widens what a search may see: they reorder
the same namespace's candidates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from pipeline.domain.errors import InvalidInput
from pipeline.domain.read_model import FusionParams
from pipeline.retrieval.ppr.model import PprConfig

MAX_WEIGHT = 10.0  # a channel's vote, 0..10 (the wired ones are 0.5..1.25)
MIN_RRF_K, MAX_RRF_K = 0, 1000  # RRF's k (wired: 10, and 5 between the hybrid and PPR lists)
MIN_DAMPING, MAX_DAMPING = 0.05, 0.95  # PPR's damping (wired: 0.5); 1 would never restart
MAX_PASSAGE_SEED_WEIGHT = 1.0  # the weak seeds' share against the named entities' 1


@dataclass(frozen=True)
class Fusion:
    """The fusion one search runs with: each channel's weight (by name, every channel the
    engine has), RRF's k, and the PPR fusion's k, list weight and stage config."""

    weights: Mapping[str, float]
    rrf_k: int
    ppr_rrf_k: int
    ppr_list_weight: float
    ppr: PprConfig | None

    def channels(self) -> list[str]:
        """The channels to ask: those with a weight above 0, in the engine's order."""
        return [name for name, weight in self.weights.items() if weight > 0]

    def explain(self) -> dict[str, object]:
        """The knobs as an explain block shows them."""
        out: dict[str, object] = {"weights": dict(self.weights), "rrf_k": self.rrf_k}
        if self.ppr is not None:
            out["ppr"] = {"damping": self.ppr.damping, "list_weight": self.ppr_list_weight,
                          "passage_seed_weight": self.ppr.passage_seed_weight,
                          "rrf_k": self.ppr_rrf_k}
        return out


def resolve_fusion(params: FusionParams | None, *, channels: Sequence[str],
                   weights: Mapping[str, float], rrf_k: int, ppr_rrf_k: int,
                   ppr_list_weight: float, ppr: PprConfig | None) -> Fusion:
    """The wired values overridden by `params`; an unknown channel or a value out of bounds is
    InvalidInput naming its field (`fusion.weights.<name>`, `fusion.rrf_k`, ...)."""
    wired = {name: float(weights.get(name, 1.0)) for name in channels}
    if params is None:
        return Fusion(wired, rrf_k, ppr_rrf_k, ppr_list_weight, ppr)
    for name, weight in params.weights:
        if name not in wired:
            raise InvalidInput(f"fusion.weights: no channel {name!r} (channels: "
                               f"{', '.join(channels)})", field=f"fusion.weights.{name}")
        _bounded(weight, 0.0, MAX_WEIGHT, f"fusion.weights.{name}")
        wired[name] = float(weight)
    if params.rrf_k is not None:
        _bounded(params.rrf_k, MIN_RRF_K, MAX_RRF_K, "fusion.rrf_k")
        rrf_k = params.rrf_k
    if params.ppr_rrf_k is not None:
        _bounded(params.ppr_rrf_k, MIN_RRF_K, MAX_RRF_K, "fusion.ppr.rrf_k")
        ppr_rrf_k = params.ppr_rrf_k
    if params.ppr_list_weight is not None:
        _bounded(params.ppr_list_weight, 0.0, MAX_WEIGHT, "fusion.ppr.list_weight")
        ppr_list_weight = params.ppr_list_weight
    if ppr is not None:
        if params.ppr_damping is not None:
            _bounded(params.ppr_damping, MIN_DAMPING, MAX_DAMPING, "fusion.ppr.damping")
            ppr = replace(ppr, damping=params.ppr_damping)
        if params.ppr_passage_seed_weight is not None:
            _bounded(params.ppr_passage_seed_weight, 0.0, MAX_PASSAGE_SEED_WEIGHT,
                     "fusion.ppr.passage_seed_weight")
            ppr = replace(ppr, passage_seed_weight=params.ppr_passage_seed_weight)
    return Fusion(wired, rrf_k, ppr_rrf_k, ppr_list_weight, ppr)


def _bounded(value: float, low: float, high: float, field: str) -> None:
    if not low <= value <= high:
        raise InvalidInput(f"{field} must be within {low:g}..{high:g}", field=field)
