"""Planted bugs: test switches that break a broker on purpose, so that the chaos
checkers can be shown to catch what they claim to (a checker that cannot fail
does not count).

A broker reads them from ``KAFKASIM_PLANTED_BUGS`` (comma-separated names), which
only ``kafkasim chaos run --plant-bug`` sets.  An unknown name is an error; an
empty or absent variable plants nothing.  Every broker logs the set it runs
with in its ``broker_starting`` event.
"""
from __future__ import annotations

import os
from typing import Mapping

ENV = "KAFKASIM_PLANTED_BUGS"

BUGS = {
    "commit-before-hw": "the coordinator acknowledges offset commits once its own log has them (acks=1), "
                        "not once the high watermark covers them",
    "zombie-controller": "a controller that lost its ZooKeeper session keeps acting and its writes are not "
                         "fenced by /controller_epoch; brokers skip the controller-epoch check",
    "fenced-generation-commit": "the coordinator accepts offset commits without checking the member and "
                                "generation",
}


class UnknownBug(ValueError):
    pass


def parse(text: str | None) -> frozenset[str]:
    names = frozenset(n.strip() for n in (text or "").split(",") if n.strip())
    unknown = sorted(names - set(BUGS))
    if unknown:
        raise UnknownBug(f"{ENV}: unknown planted bug {unknown[0]!r} (known: {', '.join(BUGS)})")
    return names


def planted(environ: Mapping[str, str] = os.environ) -> frozenset[str]:
    return parse(environ.get(ENV))
