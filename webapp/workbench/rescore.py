"""Re-score a finished run's stored rollouts with another recipe (issue 9).

Each rollout keeps the episode facts its reward terms scored (Rollout.episode), so a new
recipe's terms score them again exactly as training would have (scoring.recipe_total, the
same function the worker's TRL reward functions follow), and GRPO's advantages are computed
again the way TRL 1.16 computes them (GRPOTrainer._generate_and_score_completions,
multi_objective_aggregation "sum_then_normalize"):

- a rollout's total is the nansum of weight x value over every compiled function; one for
  which every function gave None is unscorable: NaN, left out of its group's baseline, and
  its advantage is 0;
- a group is the num_generations completions of one prompt at one step: here the rollouts
  of one (step, prompt_key), in seq order (a step re-run after a resume is split back into
  groups of num_generations);
- advantage = (total - nanmean(group)) / (std + 1e-4), std the Bessel-corrected nanstd of the
  group ("group"), of the step's whole batch ("batch"), or no division ("none"); a NaN (a
  group with one scored rollout) becomes 0.

The old advantages are computed the same way from the stored totals and checked against the
stored ones (`old_advantage_check`): the proof that this math is TRL's.

Two parts: the pure math (`Rescorer`, no ORM: the worker feeds it rows) and the request
check that queues the job (`run_rescore_create`). The run's rows are never written.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from webapp.jobs.services import job_create
from webapp.rewards.models import RewardRecipe
from webapp.rewards.scoring import episode_from_stored, recipe_total
from webapp.rewards.selectors import RecipeRefError, recipe_resolve
from webapp.rewards.terms import RecipeRef, RewardTerm, terms_dump, walk_terms
from webapp.runs.config import RunConfigError
from webapp.runs.models import Rollout, Run
from webapp.runs.services import RunStateError
from webapp.workbench.payload import parse_body

KIND = "rescore"
SCALE_REWARDS = ("group", "batch", "none")
# TRL adds this to the std before dividing (grpo_trainer.py, "advantages / (std_rewards + 1e-4)").
STD_EPSILON = 1e-4
# TRL's frac_reward_zero_std: torch.isclose(std, 0), i.e. |std| <= atol 1e-8.
ZERO_STD = 1e-8
SIGN_CHANGES_SHOWN = 200
HISTOGRAM_BINS = 20
NAN = float("nan")


class RescoreError(ValueError):
    """Nothing in the run can be re-scored: the job fails with this message."""


@dataclass(slots=True)
class _Row:
    seq: int
    step: int
    prompt_key: str
    old_total: float  # NaN: unscorable
    new_total: float  # NaN: unscorable, or not re-scorable (see `rescorable`)
    stored_advantage: float | None
    rescorable: bool
    old_terms: dict[str, float]
    new_terms: dict[str, float]


def _total(values: Iterable[float | None], total: float | None) -> float:
    """TRL's total: NaN when every function gave None, else the weighted nansum (0 when the
    top-level terms all gave None but a weight-0 inner one did not)."""
    if all(v is None for v in values):
        return NAN
    return float(total) if total is not None else 0.0


def _nanmean(values: list[float]) -> float:
    present = [v for v in values if not math.isnan(v)]
    return sum(present) / len(present) if present else NAN


def _nanstd(values: list[float]) -> float:
    """trl.trainer.utils.nanstd: Bessel-corrected, NaN with fewer than two values."""
    present = [v for v in values if not math.isnan(v)]
    if len(present) < 2:
        return NAN
    mean = sum(present) / len(present)
    return math.sqrt(sum((v - mean) ** 2 for v in present) / (len(present) - 1))


def group_advantages(totals: list[float], *, scale_rewards: str, batch_std: float | None = None) -> list[float]:
    """One group's advantages from its totals (NaN: unscorable), as TRL computes them.
    `batch_std`: the nanstd of the step's whole batch, for scale_rewards "batch"."""
    if scale_rewards not in SCALE_REWARDS:
        raise ValueError(f"scale_rewards is one of {', '.join(SCALE_REWARDS)}, not {scale_rewards!r}")
    mean = _nanmean(totals)
    std = batch_std if scale_rewards == "batch" else _nanstd(totals)
    out = []
    for total in totals:
        advantage = total - mean
        if scale_rewards != "none":
            advantage = advantage / ((NAN if std is None else std) + STD_EPSILON)
        out.append(0.0 if math.isnan(advantage) else advantage)
    return out


def _stats(values: list[float]) -> dict[str, Any]:
    present = [v for v in values if not math.isnan(v)]
    if not present:
        return {"count": 0, "mean": None, "std": None, "min": None, "max": None}
    std = _nanstd(present)
    return {
        "count": len(present),
        "mean": sum(present) / len(present),
        "std": None if math.isnan(std) else std,
        "min": min(present),
        "max": max(present),
    }


def overlaid_histogram(old: list[float], new: list[float], bins: int = HISTOGRAM_BINS) -> dict[str, Any] | None:
    """Old and new totals counted on the same equal-width bins (one bin when all are equal)."""
    values = [v for v in [*old, *new] if not math.isnan(v)]
    if not values:
        return None
    low, high = min(values), max(values)
    if high - low < 1e-12:
        return {
            "edges": [low, high],
            "old": [sum(1 for v in old if not math.isnan(v))],
            "new": [sum(1 for v in new if not math.isnan(v))],
        }
    width = (high - low) / bins

    def count(series: list[float]) -> list[int]:
        counts = [0] * bins
        for value in series:
            if not math.isnan(value):
                counts[min(int((value - low) / width), bins - 1)] += 1
        return counts

    return {"edges": [low + i * width for i in range(bins + 1)], "old": count(old), "new": count(new)}


def _sign(value: float) -> int:
    return (value > 0) - (value < 0)


def _finite_or_none(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


class Rescorer:
    """Feed it a run's rollouts (`add`, in any order, one page after another), then `report()`.

    Keeps a few numbers per rollout and its terms' values (never its transcript), so a
    100k-rollout run fits in memory."""

    def __init__(
        self, terms: list[RewardTerm], *, scale_rewards: str = "group", num_generations: int | None = None
    ) -> None:
        if scale_rewards not in SCALE_REWARDS:
            raise ValueError(f"scale_rewards is one of {', '.join(SCALE_REWARDS)}, not {scale_rewards!r}")
        self.terms = terms
        self.term_names = [term.name for _, term, _ in walk_terms(terms)]
        self.scale_rewards = scale_rewards
        self.num_generations = num_generations
        self.rows: list[_Row] = []
        self.no_facts = 0
        self.unscored = 0
        self.old_term_names: dict[str, None] = {}  # ordered: the run's functions as first seen

    def add(self, rollout: Mapping[str, Any]) -> None:
        """One stored rollout: seq, step, prompt_key, env, rewards, reward, advantage,
        episode, unscored (Rollout's fields)."""
        rewards = rollout.get("rewards") or {}
        old_values = [_finite_or_none(v) for v in rewards.values()]
        old_total = _total(old_values, _finite_or_none(rollout.get("reward")))
        old_terms = {str(k): v for k, v in zip(rewards, old_values, strict=True) if v is not None}
        for name in rewards:
            self.old_term_names.setdefault(str(name))
        new_terms: dict[str, float] = {}
        unscored = bool(rollout.get("unscored"))
        facts = rollout.get("episode") or {}
        rescorable = unscored or bool(facts)
        new_total = NAN
        if unscored:
            self.unscored += 1
        elif not facts:
            self.no_facts += 1
        else:
            episode = episode_from_stored(str(rollout.get("env") or ""), facts, False)
            values: dict[str, float | None] = {}
            total = recipe_total(self.terms, episode, values)
            new_total = _total(values.values(), total)
            new_terms = {name: value for name, value in values.items() if value is not None}
        self.rows.append(_Row(
            seq=int(rollout["seq"]), step=int(rollout["step"]), prompt_key=str(rollout.get("prompt_key") or ""),
            old_total=old_total, new_total=new_total,
            stored_advantage=_finite_or_none(rollout.get("advantage")), rescorable=rescorable,
            old_terms=old_terms, new_terms=new_terms,
        ))

    def _groups(self) -> list[list[_Row]]:
        by_key: dict[tuple[int, str], list[_Row]] = defaultdict(list)
        for row in self.rows:
            by_key[(row.step, row.prompt_key)].append(row)
        groups: list[list[_Row]] = []
        size = self.num_generations
        for key in sorted(by_key):
            rows = sorted(by_key[key], key=lambda r: r.seq)
            if size and len(rows) > size and len(rows) % size == 0:
                groups.extend(rows[i:i + size] for i in range(0, len(rows), size))
            else:
                groups.append(rows)
        return groups

    def _advantages(self, groups: list[list[_Row]], attr: str) -> list[list[float]]:
        batch_std: dict[int, float] = {}
        if self.scale_rewards == "batch":
            per_step: dict[int, list[float]] = defaultdict(list)
            for group in groups:
                per_step[group[0].step].extend(getattr(r, attr) for r in group)
            # TRL: nanstd of the whole generation batch, 0 for a batch of one.
            batch_std = {step: (_nanstd(v) if len(v) > 1 else 0.0) for step, v in per_step.items()}
        return [
            group_advantages([getattr(r, attr) for r in group], scale_rewards=self.scale_rewards,
                             batch_std=batch_std.get(group[0].step))
            for group in groups
        ]

    def report(self) -> dict[str, Any]:
        total = len(self.rows)
        if total == 0:
            raise RescoreError("the run has no stored rollouts to re-score")
        groups = self._groups()
        # The old advantages from the stored totals, over every group: TRL's math, checked.
        old_all = self._advantages(groups, "old_total")
        differences = [
            abs(computed - row.stored_advantage)
            for group, advantages in zip(groups, old_all, strict=True)
            for row, computed in zip(group, advantages, strict=True)
            if row.stored_advantage is not None
        ]
        # Old and new side by side over the groups whose every rollout could be re-scored.
        kept = [(g, a) for g, a in zip(groups, old_all, strict=True) if all(r.rescorable for r in g)]
        kept_groups = [g for g, _ in kept]
        scored_new = sum(1 for g in kept_groups for r in g if not math.isnan(r.new_total))
        if scored_new == 0:
            raise RescoreError(self._nothing_message(total))
        new_all = self._advantages(kept_groups, "new_total")
        changed: list[dict[str, Any]] = []
        lost_signal = gained_signal = 0
        for (group, old_advantages), new_advantages in zip(kept, new_all, strict=True):
            for row, computed_old, new in zip(group, old_advantages, new_advantages, strict=True):
                old = row.stored_advantage if row.stored_advantage is not None else computed_old
                old_sign, new_sign = _sign(old), _sign(new)
                if old_sign * new_sign < 0:
                    changed.append({"seq": row.seq, "step": row.step, "old": old, "new": new})
                elif old_sign and not new_sign:
                    lost_signal += 1
                elif new_sign and not old_sign:
                    gained_signal += 1
        changed.sort(key=lambda c: (-abs(c["new"] - c["old"]), c["seq"]))
        old_totals = [r.old_total for g in kept_groups for r in g]
        new_totals = [r.new_total for g in kept_groups for r in g]
        in_incomplete = sum(len(g) for g in groups) - sum(len(g) for g in kept_groups)
        sizes = sorted({len(g) for g in groups})
        return {
            "rollouts": total,
            "rescored": scored_new,
            "not_rescored": {
                "total": total - scored_new,
                "no_facts": self.no_facts,
                "unscored": self.unscored,
                # Re-scorable rollouts left out because their group has one without facts.
                "in_incomplete_groups": in_incomplete - self.no_facts,
            },
            "groups": {"total": len(groups), "compared": len(kept_groups), "sizes": sizes},
            "scale_rewards": self.scale_rewards,
            "num_generations": self.num_generations,
            "old_advantage_check": {
                "compared": len(differences),
                "max_abs_difference": max(differences) if differences else None,
            },
            "old": self._side(kept_groups, "old", [a for _, a in kept], list(self.old_term_names)),
            "new": self._side(kept_groups, "new", new_all, self.term_names),
            "histogram": overlaid_histogram(old_totals, new_totals),
            "sign_changes": {
                "count": len(changed),
                "shown": changed[:SIGN_CHANGES_SHOWN],
                "became_zero": lost_signal,
                "became_nonzero": gained_signal,
            },
        }

    def _nothing_message(self, total: int) -> str:
        parts = []
        if self.no_facts:
            parts.append(f"{self.no_facts} were stored before rollouts kept their episode facts")
        if self.unscored:
            parts.append(f"{self.unscored} were unscored (the environment lost the episode)")
        if not parts:
            parts.append("the new recipe's terms apply to none of them")
        return f"none of the run's {total} rollouts can be re-scored: " + "; ".join(parts)

    def _side(
        self, groups: list[list[_Row]], side: str, advantages: list[list[float]], names: list[str]
    ) -> dict[str, Any]:
        attr = f"{side}_total"
        totals = [getattr(r, attr) for g in groups for r in g]
        spreads = [_nanstd([getattr(r, attr) for r in g]) for g in groups]
        terms: dict[str, dict[str, Any]] = {}
        for name in names:
            values = [v for g in groups for r in g if (v := getattr(r, f"{side}_terms").get(name)) is not None]
            terms[name] = {"mean": sum(values) / len(values) if values else None, "count": len(values)}
        zero = sum(1 for s in spreads if math.isnan(s) or s <= ZERO_STD)
        measured = [s for s in spreads if not math.isnan(s)]
        flat = [a for group in advantages for a in group]
        return {
            "total": _stats(totals),
            "zero_variance_groups": zero,
            "zero_variance_fraction": zero / len(groups) if groups else 0.0,
            "mean_group_std": sum(measured) / len(measured) if measured else None,
            "advantage": _stats(flat),
            "terms": terms,
        }


# --- the request: checked here, queued as a job, run by worker/play/rescore.py -----------------------


def run_grpo_settings(config: Mapping[str, Any]) -> tuple[str, int | None]:
    """The run's scale_rewards (TRL's default "group": the run config does not set it) and
    num_generations, read from its stored config's grpo section."""
    grpo = config.get("grpo") if isinstance(config, Mapping) else None
    grpo = grpo if isinstance(grpo, Mapping) else {}
    scale = grpo.get("scale_rewards", "group")
    scale = {True: "group", False: "none"}.get(scale, scale)  # GRPOConfig's old bool form
    size = grpo.get("num_generations")
    return (scale if scale in SCALE_REWARDS else "group"), (size if isinstance(size, int) and size > 0 else None)


class RescoreIn(BaseModel):
    """`POST /api/runs/<id>/rescore/`'s body."""

    model_config = ConfigDict(extra="forbid", strict=True)

    recipe: int = Field(ge=1, le=2**31 - 1, description="Id of a saved reward recipe of yours.")
    version: int | None = Field(default=None, ge=1, le=1_000_000, description="A version of it; the latest when omitted.")


def run_rescore_create(*, owner: Any, run: Any, data: Any) -> Any:
    """Validate and queue a re-score of `run` (the caller's, finished) with one of the caller's
    recipes (a pinned version); a refused request writes nothing. Returns the Job."""

    request = parse_body(RescoreIn, data, RunConfigError)
    if run.status in Run.ACTIVE:
        raise RunStateError(
            f"run #{run.pk} is {run.status}: re-score it once it has finished "
            "(succeeded, failed, cancelled or interrupted)"
        )
    environments = (run.config or {}).get("environments", [])
    env_names = [str(env.get("name") or "") for env in environments if isinstance(env, dict)]
    try:
        ref = recipe_resolve(
            ref=RecipeRef(recipe=request.recipe, version=request.version), user=owner, env_names=env_names
        )
    except RecipeRefError as exc:
        raise RunConfigError({"recipe": [str(exc)]}) from None
    scale, size = run_grpo_settings(run.config or {})
    params = {
        "run": run.pk,
        "run_name": run.name,
        "recipe": ref.recipe,
        "recipe_name": RewardRecipe.objects.filter(pk=ref.recipe).values_list("name", flat=True).first() or "",
        "version": ref.version,
        "terms": terms_dump(list(ref.terms or [])),
        "scale_rewards": scale,
        "num_generations": size,
    }
    total = Rollout.objects.filter(run=run).count()
    return job_create(owner=owner, kind=KIND, params=params, total=total)
