"""Minimizing, once a configuration validated: the smallest change from the baseline that fixes it.

Greedy deletion (`bringup.search.minimize`) between the failing baseline and the working candidate,
answered first from what the run already knows (the strategy's observations, and on resume the
journal's earlier minimizing trials), launching only what nobody has seen, within its own budget.
Kept apart from the loop (bringup/session/run.py): it runs after the search, one question at a time.
"""

from __future__ import annotations

from collections.abc import Callable

from bringup.core.candidate import Candidate
from bringup.observe.outcome import Outcome
from bringup.record.journal import Journal
from bringup.search.minimize import MinimalFix, minimal_fix
from bringup.search.strategy import Strategy


def minimize(
    strategy: Strategy,
    journal: Journal,
    run_id: str,
    baseline: Candidate,
    working: Candidate,
    budget: int,
    launch: Callable[[Candidate], Outcome],
) -> MinimalFix:
    """Shrink the changes between the baseline and the working candidate, the deletion the model
    believes likeliest to still work first; ``launch`` runs one candidate now, at most ``budget``
    times."""
    outcomes: dict[str, Outcome] = {o.key: o.outcome for o in strategy.observations}
    # On resume, earlier minimizing trials answer again from the journal.
    for rec in journal.trials(run_id, "minimize"):
        outcomes.setdefault(strategy.predicted_key(rec.candidate), rec.outcome)
    return minimal_fix(
        baseline,
        working,
        strategy.predicted_key,
        outcomes,
        launch,
        budget,
        ignored=set(strategy.frozen),
        likelihood=strategy.success_probability,
    )
