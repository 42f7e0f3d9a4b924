"""Seeded fuzz of the .mnn loader and of forwards on mutated models (byte flips, truncations,
extreme words, inconsistent dims / strides / indexes), every case in a child process under a
memory and CPU-time limit: each ends in a result or a clean Python exception. The longer run is
``benchmarks/fuzz_models.py``; in-process decoder fuzzing is in tests/format/test_format_malformed.py."""
from __future__ import annotations

import os

import pytest

from model_fuzz import BAD, SELFTEST, Case, mutants, run_cases, summary
from shared_paths import MODELS

#: the small models of the shared corpus (MobileNetV2 is in the benchmark's longer run)
SMALL = ("mlp", "convbn", "controlflow", "opmix", "dynamic")
PER_MODEL = 24
#: exceptions that name a bad model or input (ValueError covers MNNFormatError and numpy's
#: AxisError; NotImplementedError covers UnsupportedOpError); anything else is a bug to fix
CLEAN = ("ValueError", "MNNFormatError", "AxisError", "TypeError", "IndexError",
         "NotImplementedError", "UnsupportedOpError", "MemoryError", "OverflowError")


def _cases() -> list[Case]:
    cases = []
    for i, name in enumerate(SMALL):
        with open(os.path.join(MODELS, name + ".mnn"), "rb") as fh:
            data = fh.read()
        for c in mutants(data, seed=27_000 + i, count=PER_MODEL):
            c.label = f"{name}: {c.label}"
            cases.append(c)
    return cases


def test_mutated_models_end_in_a_result_or_a_clean_exception():
    outcomes = run_cases(_cases(), mem_mb=2048, cpu_seconds=120, case_timeout=60)
    assert len(outcomes) == PER_MODEL * len(SMALL)
    bad = [o for o in outcomes if o.kind in BAD]
    assert not bad, "\n".join(f"{o.kind} ({o.detail}): {o.label}" for o in bad)
    unclean = [o for o in outcomes if o.kind == "error" and
               (o.detail.split(":", 1)[0] not in CLEAN or not o.detail.split(":", 1)[1].strip())]
    assert not unclean, "\n".join(f"{o.detail}: {o.label}" for o in unclean)
    counts = summary(outcomes)["kinds"]
    # the mutants reach both ends: models that still run, and models refused with a reason
    assert counts.get("ok", 0) >= 10 and counts.get("error", 0) >= 30, counts


def test_harness_tells_crashes_hangs_and_limits_apart(monkeypatch):
    """The child process's limits hold and every way of failing is reported as such (and the
    harness goes on with a new child for the next case)."""
    monkeypatch.setenv("MNNJIT_FUZZ_SELFTEST", "1")
    with open(os.path.join(MODELS, "mlp.mnn"), "rb") as fh:
        good = fh.read()
    cases = [Case("segv", SELFTEST["segv"]), Case("good", good), Case("hang", SELFTEST["hang"]),
             Case("alloc", SELFTEST["alloc"]), Case("good", good)]
    got = {(o.label, o.kind, o.detail.split(":", 1)[0] if o.kind == "error" else o.detail)
           for o in run_cases(cases, mem_mb=2048, cpu_seconds=60, case_timeout=3)}
    assert ("segv", "crash", "signal SIGSEGV") in got
    assert ("hang", "timeout", "signal SIGKILL") in got
    assert ("alloc", "error", "MemoryError") in got            # RLIMIT_AS in force
    assert ("good", "ok", "") in got
    # RLIMIT_CPU in force: a busy loop ends in SIGXCPU long before the wall-clock timeout
    (spin,) = run_cases([Case("spin", SELFTEST["spin"])], cpu_seconds=2, case_timeout=120)
    assert (spin.kind, spin.detail) == ("killed", "signal SIGXCPU")
