"""Reading HLO text: parsing a generated module of 100k instructions, and loading a chain of up to 100k
negates (parse, translate, build). Both must stay linear in the text: ten times the instructions,
ten times the time (``tests/hlo/test_hlo_load_scaling.py`` counts the work itself)."""

from __future__ import annotations

import kuiper
from kuiper.hlo import parse


def generated_module(instructions: int) -> str:
    """An optimised-style module: ``%``-names, metadata, layouts, broadcasts, reduces and a called computation."""
    lines = [
        "HloModule generated, is_scheduled=true, entry_computation_layout={(f32[8,16]{1,0})->f32[8,16]{1,0}}",
        "",
        "%add (a: f32[], b: f32[]) -> f32[] {",
        "  %a = f32[] parameter(0)",
        "  %b = f32[] parameter(1)",
        "  ROOT %sum = f32[] add(%a, %b)",
        "}",
        "",
        "ENTRY %main (x: f32[8,16]) -> f32[8,16] {",
        '  %v0 = f32[8,16]{1,0} parameter(0), metadata={op_name="x"}',
        "  %zero = f32[] constant(0)",
    ]
    kinds = 4
    for i in range(1, instructions - 2):
        previous = f"%v{i - 1}"
        meta = f'metadata={{op_name="jit(f)/layer{i}" source_file="/tmp/model.py" source_line={i}}}'
        if i % kinds == 0:
            lines.append(f"  %v{i} = f32[8,16]{{1,0}} add({previous}, %v{max(i - 3, 0)}), {meta}")
        elif i % kinds == 1:
            lines.append(f"  %r{i} = f32[8]{{0}} reduce({previous}, %zero), dimensions={{1}}, to_apply=%add")
            lines.append(f"  %v{i} = f32[8,16]{{1,0}} broadcast(%r{i}), dimensions={{0}}, {meta}")
        elif i % kinds == 2:
            lines.append(f"  %v{i} = f32[8,16]{{1,0}} multiply({previous}, {previous}), {meta}")
        else:
            lines.append(f"  %v{i} = f32[8,16]{{1,0}} tanh({previous}), {meta}")
    lines.append(f"  ROOT %out = f32[8,16]{{1,0}} negate(%v{instructions - 3})")
    lines.append("}")
    return "\n".join(lines) + "\n"


class ParseHlo:
    """``kuiper.hlo.parse`` on 10k and 100k instructions: the time should grow 10x, not 100x."""

    params = ([10_000, 100_000],)
    param_names = ("instructions",)
    number = 1
    repeat = 3
    timeout = 300

    def setup(self, instructions):
        self.text = generated_module(instructions)

    def time_parse(self, instructions):
        parse(self.text, source="generated.hlo.txt")


def negate_chain(instructions: int) -> str:
    """``x0 = parameter(0)``, then each instruction negates the one before: the plainest long module."""
    lines = ["HloModule chain", "ENTRY e {", "  x0 = f32[4] parameter(0)"]
    lines += [f"  x{i} = f32[4] negate(x{i - 1})" for i in range(1, instructions)]
    lines += [f"  ROOT r = f32[4] negate(x{instructions - 1})", "}"]
    return "\n".join(lines)


class LoadHlo:
    """``kuiper.load_hlo`` of a negate chain of 10k, 30k and 100k instructions: time linear in the size."""

    params = ([10_000, 30_000, 100_000],)
    param_names = ("instructions",)
    number = 1
    repeat = 3
    timeout = 600

    def setup(self, instructions):
        self.text = negate_chain(instructions)

    def time_load(self, instructions):
        kuiper.load_hlo(self.text, backend="numpy")
