"""What one iteration of each While body of an HLO program costs, step by step (issue 44's loop bodies).

    python tools/bench_flax_models.py --only LSTM fori --runs 3 --save-hlo build/flax-hlo   # needs jax
    gunzip -f build/flax-hlo/*.gz
    taskset -c 0 python tools/profile_loop_bodies.py build/flax-hlo/flax_lstm.hlo.txt [--threads 1]

The program is loaded with ``kuiper.load_hlo`` and called twice on seeded random feeds (floats normal,
integers 0), so that every step runs its specialized forward.  A third call captures the state each loop
hands its body at its second iteration and, through a StepObserver, each body step's inputs; then:

* ``loop_step``: the body's whole iteration (``Model.loop_step()``) on that state, best of 7 x N calls;
* each step's specialized forward alone on its captured inputs (S: a specialized forward, else ``forward``);
* ``plan only``: ``loop_step`` again with every step's callable replaced by one that returns the output the
  step gave, so that what is left is the plan's own loop, its slots and the state moved in and out.

The condition's steps are listed the same way (a condition of one integer comparison does not run them:
``While._condition_holds``).
"""

from __future__ import annotations

import argparse

import numpy as np

import kuiper
from kuiper.bench.timing import best_microseconds
from kuiper.graph.plan import StepObserver
from kuiper.ops.calls import While


class Capture(StepObserver):
    def __init__(self):
        self.inputs, self.outputs = {}, {}

    def before_step(self, node, inputs):
        self.inputs.setdefault(node.name, list(inputs))

    def after_step(self, node, inputs, outputs):
        self.outputs.setdefault(node.name, list(outputs))


def second_state(model, loop, feeds) -> list:
    """The state ``loop`` hands its body at the second iteration (the first one a plan made)."""
    seen = []
    body_step = loop._body_step

    def spy(state):
        if not seen:
            seen.append(list(state))
        return body_step(state)

    loop.__dict__["_body_step"] = spy
    try:
        model(*feeds)
    finally:
        del loop.__dict__["_body_step"]
    return seen[0] if seen else []


def profile(name: str, sub, state: list, repeats: int) -> None:
    capture = Capture()
    sub(*state, observer=capture)
    step = sub.loop_step()
    plan = sub.plan
    print(f"  {name}: {len(plan.steps)} steps, {len(state)} state values, "
          f"loop_step {best_microseconds(lambda: step(state), repeats, warmup=min(200, repeats)):.2f} us")
    total = 0.0
    for entry, planned in zip(plan.entries, plan.steps):
        call, inputs = entry[0], capture.inputs[planned.node.name]
        cost = best_microseconds(lambda: call(*inputs), repeats, warmup=min(200, repeats))
        total += cost
        kind = "S" if getattr(call, "__self__", None) is not planned.op else " "
        shapes = [tuple(getattr(value, "shape", ())) for value in inputs]
        print(f"    {cost:6.2f} us {kind} {planned.node.name} {planned.node.type} {shapes}")
    entries = plan.entries
    fixed = []
    for entry, planned in zip(entries, plan.steps):
        outputs = capture.outputs[planned.node.name]
        value = outputs[0] if len(outputs) == 1 else tuple(outputs)
        fixed.append(((lambda result: lambda *_: result)(value), *entry[1:]))
    plan.entries = tuple(fixed)
    try:
        overhead = best_microseconds(lambda: step(state), repeats, warmup=min(200, repeats))
    finally:
        plan.entries = entries
    print(f"    sum of the steps alone {total:.2f} us; plan only {overhead:.2f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("hlo", help="an HLO text file")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2000)
    args = parser.parse_args()
    with open(args.hlo) as handle:
        model = kuiper.load_hlo(handle.read(), threads=args.threads)
    rng = np.random.RandomState(0)
    feeds = [rng.standard_normal(spec.shape).astype(spec.dtype) if spec.dtype.startswith("float")
             else np.zeros(spec.shape, spec.dtype) for spec in model.inputs]
    model(*feeds)
    model(*feeds)
    for loop in [step.op for step in model.plan.steps if isinstance(step.op, While)]:
        print(f"{loop.node.name}:")
        state = second_state(model, loop, feeds)
        if not state:
            print("  (no second iteration)")
            continue
        profile("body", loop.body, state, args.repeats)
        profile("condition", loop.condition, state, args.repeats)


if __name__ == "__main__":
    main()
