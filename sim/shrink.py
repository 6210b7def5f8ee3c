"""``sim shrink``: the smallest fault schedule (fewest faults, then shortest) that still fails the same checker.

Greedy, as delta debugging's last step, in passes a user would make by hand:

1. **drop** faults one at a time (last first) while the run still fails;
2. **merge** two faults of one kind that hit the same brokers and overlap or touch in time into one
   spanning both;
3. **pin** each fault aimed by role (``controller``, ``coordinator:g1``, ``leader:t/0``, ``random``)
   at the broker it hit (``broker:<id>``), so that dropping another fault no longer moves it to
   another broker, then drop again;
4. **reshape, then drop**: change one fault (a kill becomes a pause of the same window or a pause a
   kill, a power loss or a torn tail a plain kill, a partition a pause; the fault moved a second or a
   quarter second earlier or later; its window doubled) and keep the change only when it still fails
   *and* lets another fault go;
5. **shorter faults**: halve each one's length while it still fails;
6. **a shorter run**: cut the duration to just after the last heal.

Every attempt is a whole simulated run with the same seed and the candidate schedule (each fault
resolves its target with its own seed, so the faults kept behave as they did, as far as the cluster
lets them), and fails only when the checker that caught the original run reports again.  A
schedule tried once is not run again.  Deterministic: the same seed and budget give the same
attempts in the same order; at most ``budget`` runs.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterator

from judge.registry import CHECKERS, INVARIANTS, TXN_CHECKERS, kinds_of

# the checkers a shrink keeps failing: the registry's, then the transactional workload's
ALL_CHECKERS = {**CHECKERS, **TXN_CHECKERS}
from chaos.schedule import Fault
from sim.faults import shorter
from sim.run import SimOptions, SimResult, SimRun

ROLE_TARGETS = ("controller", "coordinator:", "leader:", "random")
#: the simpler or neighbouring kind each kind is tried as (the reshape pass)
KIND_SWAPS = {"kill": ("pause",), "pause": ("kill",), "power-loss": ("kill",), "truncate": ("kill",),
              "partition": ("pause",), "expire-session": ("kill",)}
MOVES_MS = (-1000, 1000, -250, 250)


def checker_of(kinds: list[str]) -> str | None:
    """The first checker (in the registry's order, the transactional ones after), else invariant, reporting one
    of ``kinds``."""
    for name, c in [*ALL_CHECKERS.items(), *INVARIANTS.items()]:
        if set(c.kinds) & set(kinds):
            return name
    return None


@dataclass
class Shrunk:
    opts: SimOptions
    faults: list[Fault]
    checker: str
    result: SimResult
    attempts: int
    original_faults: int


def _key(opts: SimOptions) -> tuple:
    return (opts.duration_s, tuple(tuple(sorted(f.to_json().items())) for f in opts.schedule or []))


def brokers_hit(result: SimResult) -> dict[int, list[int]]:
    """fault id -> the brokers it hit (its nemesis start line), in the run ``result``."""
    out: dict[int, list[int]] = {}
    for h in result.history:
        v = h.get("value")
        if h.get("process") == "nemesis" and isinstance(v, dict) and v.get("phase") == "start" \
                and not v.get("skipped"):
            out[v["fault"]] = [n for n in v.get("nodes", []) if isinstance(n, int)]
    return out


class ShrinkSearch:
    def __init__(self, opts: SimOptions, base: SimResult, kinds: set[str], budget: int,
                 on_attempt: Callable[[int, list[Fault], bool], None] | None) -> None:
        self.best_opts = replace(opts, schedule=list(base.faults))
        self.best = base
        self.kinds = kinds
        self.budget = budget
        self.on_attempt = on_attempt
        self.attempts = 0
        self.seen: set[tuple] = {_key(self.best_opts)}

    @property
    def faults(self) -> list[Fault]:
        return list(self.best_opts.schedule or [])

    def left(self) -> bool:
        return self.attempts < self.budget

    def fails(self, candidate: SimOptions) -> SimResult | None:
        """Run ``candidate`` (once per schedule): its result when the same checker fails, else None."""
        key = _key(candidate)
        if key in self.seen or not self.left():
            return None
        self.seen.add(key)
        self.attempts += 1
        r = SimRun(candidate).run()
        ok = bool(self.kinds & set(r.kinds))
        if self.on_attempt is not None:
            self.on_attempt(self.attempts, list(candidate.schedule or []), ok)
        return r if ok else None

    def take(self, schedule: list[Fault]) -> bool:
        cand = replace(self.best_opts, schedule=schedule)
        r = self.fails(cand)
        if r is not None:
            self.best_opts, self.best = cand, r
        return r is not None

    # ------------------------------------------------------------------ the passes

    def drop_one(self) -> bool:
        faults = self.faults
        return any(self.take(faults[:i] + faults[i + 1:]) for i in reversed(range(len(faults))) if self.left())

    def drops(self) -> None:
        while self.left() and self.drop_one():
            pass

    def merges(self) -> None:
        progress = True
        while progress and self.left():
            progress = False
            faults, hit = self.faults, brokers_hit(self.best)
            for i in range(len(faults)):
                for j in range(i + 1, len(faults)):
                    a, b = faults[i], faults[j]
                    if a.kind != b.kind or not hit.get(a.id) or hit.get(a.id) != hit.get(b.id):
                        continue
                    first, second = (a, b) if a.at_ms <= b.at_ms else (b, a)
                    if second.at_ms > first.heal_at_ms:
                        continue
                    merged = replace(first, heal_at_ms=max(a.heal_at_ms, b.heal_at_ms))
                    rest = [f for k, f in enumerate(faults) if k not in (i, j)]
                    if self.take(sorted(rest + [merged], key=lambda f: (f.at_ms, f.id))):
                        progress = True
                        break
                if progress or not self.left():
                    break

    def pin(self) -> None:
        hit = brokers_hit(self.best)
        pinned = [replace(f, target=f"broker:{hit[f.id][0]}")
                  if f.target.startswith(ROLE_TARGETS) and len(hit.get(f.id, [])) == 1 else f for f in self.faults]
        if pinned != self.faults:
            self.take(pinned)

    def reshapes(self, f: Fault) -> Iterator[Fault]:
        end = int(self.best_opts.duration_s * 1000)
        for kind in KIND_SWAPS.get(f.kind, ()):
            yield replace(f, kind=kind, peer=None, direction=None, latency_ms=None, jitter_ms=None, loss=None,
                          truncate_bytes=None)
        for d in MOVES_MS:
            if 0 <= f.at_ms + d and f.heal_at_ms + d <= end:
                yield replace(f, at_ms=f.at_ms + d, heal_at_ms=f.heal_at_ms + d)
        longer = min(end, f.heal_at_ms + (f.heal_at_ms - f.at_ms))
        if longer > f.heal_at_ms:
            yield replace(f, heal_at_ms=longer)

    def reshape_then_drop(self) -> bool:
        """One fault changed, kept only when the run still fails and another fault can then go."""
        faults = self.faults
        for i, f in enumerate(faults):
            for g in self.reshapes(f):
                if not self.left():
                    return False
                cand = faults[:i] + [g] + faults[i + 1:]
                before = (self.best_opts, self.best)
                if not self.take(cand):
                    continue
                if self.drop_one():
                    return True
                self.best_opts, self.best = before   # it let nothing go: not simpler, undone
        return False

    def shorten_faults(self) -> None:
        for i in range(len(self.faults)):
            while self.left():
                faults = self.faults
                if faults[i].heal_at_ms - faults[i].at_ms <= 200:
                    break
                faults[i] = shorter(faults[i])
                if not self.take(faults):
                    break

    def shorter_run(self) -> None:
        last = max((f.heal_at_ms for f in self.faults), default=0)
        dur = max(5.0, round(last / 1000 + 3, 1))
        if dur < self.best_opts.duration_s and self.left():
            cand = replace(self.best_opts, duration_s=dur)
            r = self.fails(cand)
            if r is not None:
                self.best_opts, self.best = cand, r


def shrink(opts: SimOptions, *, budget: int = 150,
           on_attempt: Callable[[int, list[Fault], bool], None] | None = None) -> Shrunk | None:
    """None when the seed's run does not fail."""
    base = SimRun(opts).run()
    checker = checker_of(base.kinds)
    if checker is None:
        return None
    s = ShrinkSearch(opts, base, set(kinds_of(checker)), budget, on_attempt)
    s.drops()
    if s.faults:
        s.merges()
        s.drops()
        s.pin()
        s.drops()
        while s.left() and s.reshape_then_drop():
            s.drops()
    s.shorten_faults()
    s.shorter_run()
    faults = [replace(f, id=i) for i, f in enumerate(s.faults)]
    return Shrunk(replace(s.best_opts, schedule=faults), faults, checker, s.best, s.attempts, len(base.faults))
