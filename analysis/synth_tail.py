"""The end of a synthetic run (``analysis.synthetic``): final reads, the groups' drain and final fetches, broker
stops, and the compacted ``__consumer_offsets`` segments."""
from __future__ import annotations

from pathlib import Path
from typing import Any, TYPE_CHECKING

import numpy as np

from analysis.synth_shape import (
    assignment, event_line, FINAL_BATCH, GROUPS, LINE_NS, MEMBER_PROC_BASE, NPART, NPROD, NSLOTS, OFFSETS_TOPIC,
    PROBE_GROUP, SyntheticError, tick_start, TOPIC, tp, ts_ms,
)
from analysis.synth_ticks import flush, hist_line, Out, write_events

if TYPE_CHECKING:
    from analysis.synth_plan import Plan


# ---------------------------------------------------------------------- the end of the run

def write_tail(plan: Plan, hist_path: Path, ev_dir: Path, tag: str) -> dict[str, Any]:
    """After the last tick: final reads, the groups' drain, leaves and final fetch-committed, broker stops."""
    out = Out()
    T = plan.T
    idx = int(plan.lines_before[T])
    ts0 = tick_start(T)
    j = 0
    lines = out.lines

    def H(typ: str, proc: int, f: str, val: str, err: str = "null", node: Any = "null", grp: str = "null",
          fin: str = "") -> int:
        nonlocal idx, j
        lines.append(hist_line(idx, typ, proc, ts0 + j * LINE_NS, f, val, err, node, grp, fin))
        if typ != "invoke":
            out.counts[f"{f}:{typ}"] = out.counts.get(f"{f}:{typ}", 0) + 1
        idx += 1
        j += 1
        return idx - 1

    # every ok send, per partition, in offset order
    ticks = np.arange(T, dtype=np.int64)
    slot_t, slot_k, slot_p = [], [], []
    for k in range(NPROD):
        pk = (ticks * NPROD + k) % NPART
        ok = plan.leader_ev[pk, ticks] > 0
        slot_t.append(ticks[ok])
        slot_k.append(np.full(int(ok.sum()), k))
        slot_p.append(pk[ok])
    st, sk, sp = np.concatenate(slot_t), np.concatenate(slot_k), np.concatenate(slot_p)
    order = np.lexsort((sk, st))
    st, sk, sp = st[order], sk[order], sp[order]
    override = plan.value_override
    omit = plan.omit_final
    last_read: dict[int, int] = {}
    final_base = MEMBER_PROC_BASE + 2 * NSLOTS * (max(len(v) for v in plan.reb.values()) + 1)
    for p in range(NPART):
        sel = sp == p
        tt, kk = st[sel].tolist(), sk[sel].tolist()
        hw = len(tt)
        if hw != int(plan.sent_before[T, p]):
            raise SyntheticError(f"partition {p}: {hw} ok sends, planned {int(plan.sent_before[T, p])}")
        leader = int(plan.leader_ev[p, T])
        proc = final_base + p
        inv = f'{{"topic":"{TOPIC}","partition":{p}}}'
        for lo in range(0, max(hw, 1), FINAL_BATCH):
            recs = []
            for o in range(lo, min(hw, lo + FINAL_BATCH)):
                if (p, o) in omit:
                    continue
                u, k = tt[o], kk[o]
                recs.append(f'["{TOPIC}",{p},{o},"{override.get((u, k)) or f"p{k}-{u}"}"]')
            H("invoke", proc, "poll", inv, fin=',"final":true')
            last_read[p] = H("ok", proc, "poll", f'{{"topic":"{TOPIC}","partition":{p},"records":[{",".join(recs)}],'
                                                 f'"high_watermark":{hw}}}', node=leader, fin=',"final":true')
    for (p, o), pid in omit.items():
        out.cite(pid, last_read[p])
    # the drain: one more poll of the last sends, and a commit of everything
    totals = {p: int(plan.sent_before[T, p]) for p in range(NPART)}
    fin_specs = []
    for g in GROUPS:
        gq = f'"{g.name}"'
        gen = plan.generation(g, T)
        C = int(plan.coord[plan.gpart[g.name], T])
        slots = []
        for m in range(g.members):
            inc = plan.incarnation(g, m, T)
            slots.append((plan.member_id(g, m, T, inc), plan.procs(g, m, inc)[0], assignment(g, gen, m)))
        frm = plan.poll_from(g, T)
        for mid, pp, _parts in slots:
            H("invoke", pp, "poll", f'{{"member":"{mid}","generation":{gen}}}', grp=gq)
        for mid, pp, parts in slots:
            recs = []
            for p in parts:
                for u in range(frm, T):
                    for k in range(NPROD):
                        if (u * NPROD + k) % NPART == p and plan._send_ok(u, k):
                            v = override.get((u, k)) or f"p{k}-{u}"
                            recs.append(f'["{TOPIC}",{p},{plan._send_offset(u, k)},"{v}"]')
            H("ok", pp, "poll", f'{{"member":"{mid}","generation":{gen},"records":[{",".join(recs)}]}}', grp=gq)
        vals = []
        for mid, pp, parts in slots:
            offs = ",".join(f'"{tp(p)}":{totals[p]}' for p in parts)
            v = f'{{"member":"{mid}","generation":{gen},"offsets":{{{offs}}}}}'
            vals.append(v)
            H("invoke", pp, "commit", v, grp=gq)
        for (mid, pp, _parts), v in zip(slots, vals):
            H("ok", pp, "commit", v, node=C, grp=gq)
        fin_specs.append((g, gen, C, slots))
    # the probe's last read-back
    Cp = int(plan.coord[plan.probe_part, T])
    H("invoke", NPROD, "fetch-committed", "{}", grp=f'"{PROBE_GROUP}"', fin=',"final":true')
    pv = f'{{"offsets":{{"{TOPIC}/0":{plan.probe_last}}}}}' if plan.probe_last else '{"offsets":{}}'
    H("ok", NPROD, "fetch-committed", pv, node=Cp, grp=f'"{PROBE_GROUP}"', fin=',"final":true')
    # leaves, then each group's final fetch-committed
    for g, gen, C, slots in fin_specs:
        gq = f'"{g.name}"'
        P = plan.gpart[g.name]
        for mid, pp, _parts in slots:
            H("invoke", pp, "leave", f'{{"member":"{mid}"}}', grp=gq)
            H("ok", pp, "leave", f'{{"member":"{mid}"}}', grp=gq)
            ns = ts0 + j * LINE_NS - 1000
            out.events.append((ns, C, event_line(ns, C, "member_removed", partition=P, group=g.name, member_id=mid,
                                                 group_instance_id=None, reason="left", replaced_by=None)))
        ns = ts0 + j * LINE_NS - 500
        out.events.append((ns, C, event_line(ns, C, "group_state_changed", partition=P, group=g.name,
                                             **{"from": "PreparingRebalance", "to": "Empty", "generation": gen + 1,
                                                "reason": None})))
        out.events.append((ns + 100, C, event_line(ns + 100, C, "group_stored", partition=P, group=g.name,
                                                   generation=gen + 1, members=[], reason="empty", error=0)))
        pp = slots[0][1]
        offs = ",".join(f'"{tp(p)}":{totals[p]}' for p in range(NPART))
        H("invoke", pp, "fetch-committed", "{}", grp=gq, fin=',"final":true')
        i = H("ok", pp, "fetch-committed", f'{{"offsets":{{{offs}}}}}', node=C, grp=gq, fin=',"final":true')
        for pl in plan.plants:
            if pl["kind"] == "unseen-message" and pl["details"]["group"] == g.name:
                out.cite(pl["id"], i)
    flush(out, hist_path)
    end_ns = ts0 + j * LINE_NS + 100_000_000
    plan.cluster.ev = []
    plan.cluster.shutdown(end_ns)
    for e in plan.cluster.ev:
        out.events.append((e["ns"], e["broker"], event_line(e["ns"], e["broker"], e["type"], **e["fields"])))
    out.events.extend(plan.events_between(ts0, 1 << 62))
    write_events(out.events, ev_dir, tag)
    return {"counts": out.counts, "plants": out.plants, "lines": idx - int(plan.lines_before[T]), "end_ns": end_ns,
            "last_index": idx - 1}


# ---------------------------------------------------------------------- the segments

def write_segments(plan: Plan, run: Path) -> None:
    """A compacted ``__consumer_offsets`` log per hosting partition on each replica: the last record of each key."""
    from coordinator.records import GroupMetadataKey, GroupValue, OffsetKey, OffsetValue, encode_key, encode_value
    from kafkacommon.record_batch import encode_batch

    T = plan.T
    end_ms = int(ts_ms(tick_start(T + 1)))
    for P in plan.hosting:
        recs = []
        for g in plan.groups_on[P]:
            if g == PROBE_GROUP:
                if plan.probe_last:
                    recs.append((encode_key(OffsetKey(g, TOPIC, 0)),
                                 encode_value(OffsetValue(plan.probe_last, -1, "", end_ms - 500)), end_ms - 500))
                continue
            spec = plan.group_spec[g]
            for p in range(NPART):
                recs.append((encode_key(OffsetKey(g, TOPIC, p)),
                             encode_value(OffsetValue(int(plan.sent_before[T, p]), -1, "", end_ms)), end_ms))
            recs.append((encode_key(GroupMetadataKey(g)),
                         encode_value(GroupValue("consumer", plan.generation(spec, T) + 1, None, None, end_ms + 5)),
                         end_ms + 5))
        if not recs:
            continue
        end = int(plan.off_before[T, P]) + NPART * len(plan.groups_on[P]) + len(plan.groups_on[P])
        base = max(0, end - len(recs))
        s = plan.cluster.parts[(OFFSETS_TOPIC, P)]
        data = encode_batch(base, s.leader_epoch, recs)
        for b in s.replicas:
            d = run / "cluster" / "data" / f"broker-{b}" / f"{OFFSETS_TOPIC}-{P}"
            d.mkdir(parents=True, exist_ok=True)
            (d / "00000000000000000000.log").write_bytes(data)
