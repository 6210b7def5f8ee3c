"""Writing a range of a synthetic run's ticks (``analysis.synthetic``): the history lines of every op of a tick,
the brokers' events between ticks, and the plants that fall in the range."""
from __future__ import annotations

from pathlib import Path
from typing import Any, TYPE_CHECKING

from analysis.synth_shape import (
    assignment, BROKERS, event_line, GROUPS, GroupSpec, HB_EVERY, HW_EVERY, js, LINE_NS, NPART, NPROD, OFFSETS_TOPIC,
    PROBE_EVERY, PROBE_GROUP, PROBE_PHASE, SAMPLE_NS, SyntheticError, tick_start, TOPIC, tp, ts_ms,
)

if TYPE_CHECKING:
    from analysis.synth_plan import Plan


# ---------------------------------------------------------------------- writing ticks

class Out:
    """A writer's output: history lines, events per broker, counts, and what it learnt about plants."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.events: list[tuple[int, int, str]] = []
        self.counts: dict[str, int] = {}
        self.plants: dict[str, dict[str, list]] = {}

    def count(self, key: str, n: int = 1) -> None:
        if n:
            self.counts[key] = self.counts.get(key, 0) + n

    def cite(self, pid: str, *indexes: int) -> None:
        self.plants.setdefault(pid, {"ops": [], "events": []})["ops"].extend(indexes)

    def cite_event(self, pid: str, ns: int, broker: int, type_: str) -> None:
        self.plants.setdefault(pid, {"ops": [], "events": []})["events"].append(
            {"broker": broker, "type": type_, "mono_ns": ns})


def hist_line(idx: int, typ: str, proc: Any, tm: int, f: str, val: str, err: str = "null", node: Any = "null",
          grp: str = "null", fin: str = "") -> str:
    return (f'{{"index":{idx},"type":"{typ}","process":{proc},"time":{tm},"f":"{f}","value":{val},'
            f'"error":{err},"node":{node},"group":{grp}{fin}}}\n')


def _hw_line(ns: int, b: int, topic: str, p: int, old: int, new: int, reason: str) -> str:
    return (f'{{"ts_ms":{ts_ms(ns)},"mono_ns":{ns},"broker":{b},"type":"hw_changed","topic":"{topic}",'
            f'"partition":{p},"old":{old},"new":{new},"reason":"{reason}","decreased":false}}\n')


class _Slot:
    """One member of a group in one generation, with its history line fragments."""
    __slots__ = (
        "commit_head",
        "commit_tail",
        "hb_fail",
        "hb_inv",
        "hb_ok",
        "hp",
        "id",
        "m",
        "parts",
        "poll_inv",
        "poll_ok_head",
        "poll_ok_tail",
        "pp",
    )

    def __init__(self, g: GroupSpec, m: int, mid: str, pp: int, hp: int, gen: int) -> None:
        self.m, self.id, self.pp, self.hp = m, mid, pp, hp
        self.parts = assignment(g, gen, m)
        grp = f'"group":"{g.name}"}}\n'
        self.poll_inv = f',"f":"poll","value":{{"member":"{mid}","generation":{gen}}},"error":null,"node":null,{grp}'
        self.poll_ok_head = f',"f":"poll","value":{{"member":"{mid}","generation":{gen},"records":['
        self.poll_ok_tail = f']}},"error":null,"node":null,{grp}'
        self.commit_head = f',"f":"commit","value":{{"member":"{mid}","generation":{gen},"offsets":{{'
        self.commit_tail = grp
        hb = f',"f":"heartbeat","value":{{"member":"{mid}","generation":{gen}}},"error":'
        self.hb_inv = f'{hb}null,"node":null,{grp}'
        self.hb_ok = f'{hb}null,"node":'
        self.hb_fail = f'{hb}"NOT_COORDINATOR","node":'


def _slots(plan: Plan, g: GroupSpec, t: int) -> tuple[int, list[_Slot]]:
    gen = plan.generation(g, t)
    out = []
    for m in range(g.members):
        inc = plan.incarnation(g, m, t)
        pp, hp = plan.procs(g, m, inc)
        out.append(_Slot(g, m, plan.member_id(g, m, t, inc), pp, hp, gen))
    return gen, out


def write_ticks(plan: Plan, t0: int, t1: int, hist_path: Path, ev_dir: Path, tag: str) -> dict[str, Any]:
    """Write ticks [t0, t1) of the plan: history lines to ``hist_path``, events to ``ev_dir/broker-<b>.<tag>``.

    The hot loop: every line is one f-string of precomputed fragments."""
    out = Out()
    base = max(0, t0 - 3)
    hi = min(plan.T + 1, t1 + 1)
    sb = [plan.sent_before[base:hi, p].tolist() for p in range(NPART)]
    lev = [plan.leader_ev[p, base:hi].tolist() for p in range(NPART)]
    coord = {P: plan.coord[P, base:hi].tolist() for P in plan.hosting}
    offb = {P: plan.off_before[base:hi + 1, P].tolist() for P in plan.hosting}
    override = plan.value_override
    idx = int(plan.lines_before[t0])
    lines = out.lines
    ap = lines.append
    ev = out.events
    P_probe = plan.probe_part
    probe_coord = coord[P_probe]
    nem_get = plan.nem.get
    plants_get = plan.tick_plants.get
    planned = plan.lines[t0:t1].tolist()
    rebsets = [plan.reb_set[g.name] for g in GROUPS]
    gcoord = [coord[plan.gpart[g.name]] for g in GROUPS]
    hb_at = [{plan.hb_phase(g, m): m for m in range(g.members)} for g in GROUPS]
    keyq = [f'"{TOPIC}/{p}":' for p in range(NPART)]
    send_inv = [f',"f":"send","value":{{"topic":"{TOPIC}","value":"' for _k in range(NPROD)]
    probe_tail = f'"group":"{PROBE_GROUP}"}}\n'
    n_send_ok = n_send_fail = n_send_info = n_poll = n_commit_ok = n_commit_fail = n_hb_ok = n_hb_fail = 0
    n_probe_ok = n_probe_fail = 0
    spans = plan.alive_spans

    def sends_of(u: int) -> list[tuple[int, int, int, str, int]]:
        """(k, p, offset or -1, value, leader or -dead) of tick u's sends."""
        res = []
        local = {}
        for k in range(NPROD):
            p = (u * NPROD + k) % NPART
            L = lev[p][u - base]
            v = override.get((u, k)) or f"p{k}-{u}"
            if L > 0:
                o = local.get(p, sb[p][u - base])
                local[p] = o + 1
                res.append((k, p, o, v, L))
            else:
                res.append((k, p, -1, v, L))
        return res

    rec_cache: dict[int, list[str]] = {}

    def recs_of(u: int) -> list[str]:
        """Tick u's ok sends as poll records, joined per partition."""
        r = rec_cache.get(u)
        if r is None:
            per: list[list[str]] = [[] for _ in range(NPART)]
            for _k, p, o, v, _L in sends_of(u):
                if o >= 0:
                    per[p].append(f'["{TOPIC}",{p},{o},"{v}"]')
            r = rec_cache[u] = [",".join(x) for x in per]
        return r

    gstate = [_slots(plan, g, t0 - 1) for g in GROUPS]
    for t in range(t0, t1):
        ts0 = tick_start(t)
        tm = ts0
        first_idx = idx
        nem = nem_get(t)
        first_window = False
        if nem:
            for f, phase in nem:
                val = js({"fault": f.id, "phase": phase, "kind": "kill", "target": f.target, "nodes": [f.victim]})
                ap(hist_line(idx, "info", '"nemesis"', tm, "kill" if phase == "start" else "heal", val))
                idx += 1
                tm += LINE_NS
                out.count("kill:info" if phase == "start" else "heal:info")
                first_window = first_window or phase == "start"
        # sends
        sends = sends_of(t)
        for k, p, o, v, L in sends:
            ap(f'{{"index":{idx},"type":"invoke","process":{k},"time":{tm}{send_inv[k]}{v}"}},"error":null,'
               f'"node":null,"group":null}}\n')
            idx += 1
            tm += LINE_NS
        per: list[list[str]] = [[] for _ in range(NPART)]
        for k, p, o, v, L in sends:
            if o >= 0:
                ap(f'{{"index":{idx},"type":"ok","process":{k},"time":{tm},"f":"send","value":{{"topic":"{TOPIC}",'
                   f'"partition":{p},"offset":{o},"value":"{v}"}},"error":null,"node":{L},"group":null}}\n')
                per[p].append(f'["{TOPIC}",{p},{o},"{v}"]')
                n_send_ok += 1
            else:
                if first_window:
                    typ, err = "info", '"REQUEST_TIMED_OUT"'
                    n_send_info += 1
                else:
                    typ, err = "fail", '"UNAVAILABLE"'
                    n_send_fail += 1
                ap(f'{{"index":{idx},"type":"{typ}","process":{k},"time":{tm},"f":"send","value":{{"topic":"{TOPIC}",'
                   f'"partition":{p},"value":"{v}"}},"error":{err},"node":{-L},"group":null}}\n')
            idx += 1
            tm += LINE_NS
        rec_cache[t] = [",".join(x) for x in per]
        specs = plants_get(t) or ()
        row = None
        # groups
        for gi, g in enumerate(GROUPS):
            C = gcoord[gi][t - base]
            if t in rebsets[gi]:
                j = (tm - ts0) // LINE_NS
                idx, j = _rebalance(plan, out, g, t, idx, j, ts0, C, sb, base, specs)
                tm = ts0 + j * LINE_NS
                gstate[gi] = _slots(plan, g, t)
                continue
            if t == 0:
                continue
            _gen, slots = gstate[gi]
            for s in slots:
                ap(f'{{"index":{idx},"type":"invoke","process":{s.pp},"time":{tm}{s.poll_inv}')
                idx += 1
                tm += LINE_NS
            if t - 1 in rebsets[gi]:
                frm = plan.poll_from(g, t)
                prev = [",".join(x for x in (recs_of(u)[p] for u in range(frm, t)) if x) for p in range(NPART)]
            else:
                prev = recs_of(t - 1)
            if specs:
                prev = _plant_polls(plan, out, g, t, specs, prev, recs_of, idx, slots)
            for s in slots:
                parts = s.parts
                if len(parts) == 1:
                    r = prev[parts[0]]
                else:
                    r = ",".join(x for x in (prev[p] for p in parts) if x)
                ap(f'{{"index":{idx},"type":"ok","process":{s.pp},"time":{tm}{s.poll_ok_head}{r}{s.poll_ok_tail}')
                idx += 1
                tm += LINE_NS
            n_poll += len(slots)
            if t % g.commit_every == g.commit_phase:
                if row is None:
                    row = [sb[p][t - base] for p in range(NPART)]
                bodies = []
                for s in slots:
                    offs = {p: row[p] for p in s.parts}
                    node = C
                    pid = None
                    if specs:
                        for sp in specs:
                            if sp[0] == "backwards" and sp[1] == g.name and sp[2] == s.m:
                                offs[sp[3]] = sp[4]
                                pid = sp[5]
                            elif sp[0] == "split" and sp[1] == g.name and sp[2] == s.m:
                                node, pid = sp[3], sp[4]
                    body = s.commit_head + ",".join(f"{keyq[p]}{o}" for p, o in offs.items()) + '}},"error":'
                    bodies.append((s, body, node, pid))
                    ap(f'{{"index":{idx},"type":"invoke","process":{s.pp},"time":{tm}{body}null,"node":null,'
                       f'{s.commit_tail}')
                    if pid:
                        out.cite(pid, idx)
                    idx += 1
                    tm += LINE_NS
                for s, body, node, pid in bodies:
                    if C > 0:
                        ap(f'{{"index":{idx},"type":"ok","process":{s.pp},"time":{tm}{body}null,"node":{node},'
                           f'{s.commit_tail}')
                        n_commit_ok += 1
                    else:
                        ap(f'{{"index":{idx},"type":"fail","process":{s.pp},"time":{tm}{body}"NOT_COORDINATOR",'
                           f'"node":{-C % 3 + 1},{s.commit_tail}')
                        n_commit_fail += 1
                    if pid:
                        out.cite(pid, idx)
                    idx += 1
                    tm += LINE_NS
            m = hb_at[gi].get(t % HB_EVERY)
            if m is not None:
                s = slots[m]
                ap(f'{{"index":{idx},"type":"invoke","process":{s.hp},"time":{tm}{s.hb_inv}')
                idx += 1
                tm += LINE_NS
                if C > 0:
                    ap(f'{{"index":{idx},"type":"ok","process":{s.hp},"time":{tm}{s.hb_ok}{C},{s.commit_tail}')
                    n_hb_ok += 1
                else:
                    ap(f'{{"index":{idx},"type":"fail","process":{s.hp},"time":{tm}{s.hb_fail}{-C % 3 + 1},'
                       f'{s.commit_tail}')
                    n_hb_fail += 1
                idx += 1
                tm += LINE_NS
        # the probe: a commit outside any generation, read back at once
        if t % PROBE_EVERY == PROBE_PHASE and t >= 1:
            C = probe_coord[t - base]
            n = plan.probe_value(t)
            body = f',"f":"commit","value":{{"member":"","generation":-1,"offsets":{{"{TOPIC}/0":{n}}}}},"error":'
            lc = next((s[1] for s in specs if s[0] == "lostcommit"), None) if specs else None
            ap(f'{{"index":{idx},"type":"invoke","process":{NPROD},"time":{tm}{body}null,"node":null,{probe_tail}')
            if C > 0:
                ap(f'{{"index":{idx + 1},"type":"ok","process":{NPROD},"time":{tm + LINE_NS}{body}null,"node":{C},'
                   f'{probe_tail}')
                ap(f'{{"index":{idx + 2},"type":"invoke","process":{NPROD},"time":{tm + 2 * LINE_NS},'
                   f'"f":"fetch-committed","value":{{}},"error":null,"node":null,{probe_tail}')
                ap(f'{{"index":{idx + 3},"type":"ok","process":{NPROD},"time":{tm + 3 * LINE_NS},'
                   f'"f":"fetch-committed","value":{{"offsets":{{"{TOPIC}/0":{n - 1 if lc else n}}}}},"error":null,'
                   f'"node":{C},{probe_tail}')
                n_probe_ok += 1
                if lc:
                    out.cite(lc, idx + 1, idx + 2, idx + 3)
                if n == 1:
                    ns = tm + LINE_NS + 1000
                    ev.append((ns, C, event_line(ns, C, "group_created", partition=P_probe, group=PROBE_GROUP,
                                                 reason="commit")))
            else:
                alt = -C % 3 + 1
                ap(f'{{"index":{idx + 1},"type":"fail","process":{NPROD},"time":{tm + LINE_NS}{body}'
                   f'"NOT_COORDINATOR","node":{alt},{probe_tail}')
                ap(f'{{"index":{idx + 2},"type":"invoke","process":{NPROD},"time":{tm + 2 * LINE_NS},'
                   f'"f":"fetch-committed","value":{{}},"error":null,"node":null,{probe_tail}')
                ap(f'{{"index":{idx + 3},"type":"fail","process":{NPROD},"time":{tm + 3 * LINE_NS},'
                   f'"f":"fetch-committed","value":{{}},"error":"NOT_COORDINATOR","node":{alt},{probe_tail}')
                n_probe_fail += 1
            idx += 4
            tm += 4 * LINE_NS
        if idx - first_idx != planned[t - t0]:
            raise SyntheticError(f"tick {t}: wrote {idx - first_idx} lines, planned {planned[t - t0]}")
        if t % HW_EVERY == 0:
            _hw_samples(plan, out, t, base, sb, lev, coord, offb, spans, specs)
        if len(lines) > 50000:
            flush(out, hist_path)
        rec_cache.pop(t - 3, None)
    if idx != int(plan.lines_before[t1]):
        raise SyntheticError(f"ticks {t0}..{t1}: ended at index {idx}, planned {int(plan.lines_before[t1])}")
    flush(out, hist_path)
    for key, n in (("send:ok", n_send_ok), ("send:fail", n_send_fail), ("send:info", n_send_info),
                   ("poll:ok", n_poll), ("commit:ok", n_commit_ok + n_probe_ok),
                   ("commit:fail", n_commit_fail + n_probe_fail),
                   ("fetch-committed:ok", n_probe_ok), ("fetch-committed:fail", n_probe_fail),
                   ("heartbeat:ok", n_hb_ok), ("heartbeat:fail", n_hb_fail)):
        out.count(key, n)
    ev.extend(plan.events_between(tick_start(t0) if t0 else 0, tick_start(t1)))
    write_events(out.events, ev_dir, tag)
    return {"counts": out.counts, "plants": out.plants, "lines": idx - int(plan.lines_before[t0])}


def _plant_polls(plan: Plan, out: Out, g: GroupSpec, t: int, specs, prev: list[str], recs_of, idx: int,
                 slots: list[_Slot]) -> list[str]:
    """The records of g's polls at tick t with the plants of that tick applied (a stray record, a skipped one)."""
    prev = list(prev)
    for sp in specs:
        if sp[1] != g.name:
            continue
        if sp[0] == "unseen":
            _, _, p, o, _pid = sp
            recs = [r for r in _split_records(prev[p]) if int(r.split(",")[2]) != o]
            prev[p] = ",".join(recs)
        elif sp[0] == "stray":
            _, _, p, o, bogus, pid = sp
            prev[p] = ",".join(x for x in (f'["{TOPIC}",{p},{o},"{bogus}"]', prev[p]) if x)
            owner = next(i for i, s in enumerate(slots) if p in s.parts)
            out.cite(pid, idx + owner)
    return prev


def _split_records(joined: str) -> list[str]:
    if not joined:
        return []
    return ["[" + x.strip("[]") + "]" for x in joined.split("],[")]


def _hw_samples(plan: Plan, out: Out, t: int, base: int, sb, lev, coord, offb, spans, specs) -> None:
    """Every HW_EVERY ticks, each live broker logs hw_changed for the partitions whose HW moved."""
    ev = out.events
    ns = tick_start(t) + SAMPLE_NS
    hwp = [s for s in specs if s[0] == "hw"]
    prev = t - HW_EVERY
    for b in BROKERS:
        if not any(s0 <= t < s1 for s0, s1 in spans[b]):
            continue
        for p in range(NPART):
            new = sb[p][t + 1 - base]
            old = int(plan.sent_before[prev + 1, p]) if prev >= 0 else 0
            forced = [s for s in hwp if s[1] == b and s[2] == p]
            if new != old or forced:
                ns += 10_000
                role = "leader" if lev[p][t - base] == b else "follower"
                ev.append((ns, b, _hw_line(ns, b, TOPIC, p, old, new, role)))
            for s in forced:
                ns += 10_000
                ev.append((ns, b, _hw_line(ns, b, TOPIC, p, new, new - 3, "leader")))
                out.cite_event(s[3], ns, b, "hw_changed")
        for P in plan.hosting:
            new = offb[P][t + 1 - base]
            old = int(plan.off_before[prev + 1, P]) if prev >= 0 else 0
            if new != old:
                ns += 10_000
                ev.append((ns, b, _hw_line(ns, b, OFFSETS_TOPIC, P, old, new,
                                           "leader" if coord[P][t - base] == b else "follower")))


def flush(out: Out, path: Path) -> None:
    if out.lines:
        with open(path, "a", encoding="utf-8") as f:
            f.write("".join(out.lines))
        out.lines.clear()


def write_events(events: list[tuple[int, int, str]], ev_dir: Path, tag: str) -> None:
    events.sort(key=lambda e: (e[0], e[1]))
    by: dict[int, list[str]] = {b: [] for b in BROKERS}
    for _ns, b, line in events:
        by[b].append(line)
    for b, ls in by.items():
        with open(ev_dir / f"broker-{b}.{tag}", "w", encoding="utf-8") as f:
            f.write("".join(ls))


def _rebalance(plan: Plan, out: Out, g: GroupSpec, r: int, idx: int, j: int, ts0: int, C: int,
               sb: list[list[int]], base: int, specs) -> tuple[int, int]:
    """A rebalance of g at tick r: the members commit, one leaves and is replaced, all join, sync and fetch."""
    lines, ev = out.lines, out.events
    gn, M = g.name, g.members
    gq = f'"{gn}"'
    P = plan.gpart[gn]
    n = plan.reb_index[gn][r]
    old_gen, new_gen = n, n + 1
    if C <= 0:
        raise SyntheticError(f"rebalance of {gn} at tick {r} while its coordinator is down")
    ecount = [0]

    def E(type_: str, **fields: Any) -> None:
        ns = ts0 + j * LINE_NS + 1000 + ecount[0]
        ecount[0] += 1
        ev.append((ns, C, event_line(ns, C, type_, partition=P, group=gn, **fields)))

    def H(typ: str, proc: int, f: str, val: str, err: str = "null", node: Any = "null") -> int:
        nonlocal idx, j
        lines.append(hist_line(idx, typ, proc, ts0 + j * LINE_NS, f, val, err, node, gq))
        if typ != "invoke":
            out.counts[f"{f}:{typ}"] = out.counts.get(f"{f}:{typ}", 0) + 1
        idx += 1
        j += 1
        return idx - 1

    old = []
    for m in range(M):
        inc = plan.incarnation(g, m, r - 1) if n else -1
        old.append((inc, plan.member_id(g, m, r - 1, inc) if n else None, plan.procs(g, m, inc)[0] if n else None))
    churn = (n - 1) % M if n else None
    new = []
    for m in range(M):
        inc = plan.incarnation(g, m, r)
        new.append((inc, plan.member_id(g, m, r, inc), plan.procs(g, m, inc)[0]))
    pos = {p: sb[p][r - 1 - base] for p in range(NPART)} if n else {}
    if n:
        vals = []
        for m in range(M):
            offs = ",".join(f'"{TOPIC}/{p}":{pos[p]}' for p in assignment(g, old_gen, m))
            v = f'{{"member":"{old[m][1]}","generation":{old_gen},"offsets":{{{offs}}}}}'
            vals.append(v)
            H("invoke", old[m][2], "commit", v)
        for m in range(M):
            H("ok", old[m][2], "commit", vals[m], node=C)
        lv = f'{{"member":"{old[churn][1]}"}}'
        H("invoke", old[churn][2], "leave", lv)
        E("member_removed", member_id=old[churn][1], group_instance_id=None, reason="left", replaced_by=None)
        E("group_state_changed", **{"from": "Stable", "to": "PreparingRebalance", "generation": old_gen,
                                    "reason": f"removing member {old[churn][1]} on LeaveGroup"})
        H("ok", old[churn][2], "leave", lv)
        fresh = [churn]
    else:
        E("group_created", reason="join")
        fresh = list(range(M))
    for m in fresh:
        H("invoke", new[m][2], "join", '{"member":""}')
    for m in fresh:
        E("pending_member_added", member_id=new[m][1])
        H("fail", new[m][2], "join", f'{{"member":"{new[m][1]}","generation":-1,"leader":false,"protocol":""}}',
          '"MEMBER_ID_REQUIRED"', C)
    for m in range(M):
        H("invoke", new[m][2], "join", f'{{"member":"{new[m][1]}"}}')
    for m in fresh:
        E("member_added", member_id=new[m][1], group_instance_id=None, reason="join")
        if not n and m == 0:
            E("group_state_changed", **{"from": "Empty", "to": "PreparingRebalance", "generation": 0,
                                        "reason": f"adding new member {new[m][1]}"})
    members = [new[m][1] for m in range(M)]
    leader = new_gen % M
    E("group_state_changed", **{"from": "PreparingRebalance", "to": "CompletingRebalance", "generation": new_gen,
                                "reason": None})
    E("group_generation", generation=new_gen, protocol_type="consumer", protocol=g.protocol, leader=members[leader],
      members=members)
    for m in range(M):
        H("ok", new[m][2], "join", f'{{"member":"{new[m][1]}","generation":{new_gen},'
                                   f'"leader":{"true" if m == leader else "false"},"protocol":"{g.protocol}"}}', node=C)
    for m in range(M):
        H("invoke", new[m][2], "sync", f'{{"member":"{new[m][1]}","generation":{new_gen}}}')
    E("group_stored", generation=new_gen, members=members, reason="sync", error=0)
    E("group_state_changed", **{"from": "CompletingRebalance", "to": "Stable", "generation": new_gen,
                                "reason": None})
    first_sync = None
    for m in range(M):
        a = ",".join(f'"{tp(p)}"' for p in assignment(g, new_gen, m))
        i = H("ok", new[m][2], "sync", f'{{"member":"{new[m][1]}","generation":{new_gen},"assignment":[{a}]}}', node=C)
        first_sync = i if first_sync is None else first_sync
    fv = []
    for m in range(M):
        parts = assignment(g, new_gen, m)
        lst = ",".join(f'"{tp(p)}"' for p in parts)
        offs = ",".join(f'"{tp(p)}":{pos[p] if n else -1}' for p in parts)
        fv.append((lst, offs))
        H("invoke", new[m][2], "fetch-committed", f'{{"partitions":[{lst}]}}')
    for m in range(M):
        H("ok", new[m][2], "fetch-committed", f'{{"partitions":[{fv[m][0]}],"offsets":{{{fv[m][1]}}}}}', node=C)
    for sp in specs:
        if sp[0] == "fenced" and sp[1] == gn:
            m, pid = sp[2], sp[3]
            offs = ",".join(f'"{tp(p)}":{pos[p]}' for p in assignment(g, old_gen, m))
            v = f'{{"member":"{new[m][1]}","generation":{old_gen},"offsets":{{{offs}}}}}'
            a = H("invoke", new[m][2], "commit", v)
            b = H("ok", new[m][2], "commit", v, node=C)
            out.cite(pid, first_sync, a, b)
    return idx, j
