"""Import cycles and function-level imports among kuiper's own modules (run from the repo root).

    python tools/import_audit.py [--list]

import-linter (`lint-imports`, contracts in .importlinter) checks the layers but does not see
imports inside functions as a design smell; this counts them, and finds cycles in the graph
of all imports (module level and function level alike), so that a cycle cannot hide inside a
function. tests/test_layers.py holds the limits.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

PACKAGE = "kuiper"


def module_files(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package under ``root``."""
    files = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    return files


def _absolute(module: str, is_package: bool, level: int, name: str | None) -> str:
    if level == 0:
        return name or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _known(target: str, modules: dict[str, Path]) -> str | None:
    """The innermost module of ours that ``target`` names (``a.b.func`` -> ``a.b``), or None."""
    while target and target not in modules:
        target = target.rpartition(".")[0]
    return target or None


def imports(modules: dict[str, Path]) -> list[tuple[str, str, int, bool]]:
    """Every (importer, imported, line, inside a function) among our modules."""
    found = []
    for module, path in modules.items():
        is_package = path.name == "__init__.py"

        def visit(node: ast.AST, in_function: bool) -> None:
            for child in ast.iter_child_nodes(node):
                inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                if isinstance(child, ast.Import):
                    targets = [alias.name for alias in child.names]
                elif isinstance(child, ast.ImportFrom):
                    base = _absolute(module, is_package, child.level, child.module)
                    targets = [f"{base}.{alias.name}" for alias in child.names]
                else:
                    visit(child, inside)
                    continue
                for target in targets:
                    imported = _known(target, modules)
                    if imported is not None and imported != module:
                        found.append((module, imported, child.lineno, inside))

        visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def cycles(edges: list[tuple[str, str, int, bool]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (iterative Tarjan)."""
    graph: dict[str, set[str]] = {}
    for importer, imported, _, _ in edges:
        graph.setdefault(importer, set()).add(imported)
        graph.setdefault(imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    groups = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))
    return groups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="list every function-level import")
    parser.add_argument("--root", type=Path, default=Path("."), help="the repository root (default: .)")
    args = parser.parse_args()
    edges = imports(module_files(args.root))
    inner = [edge for edge in edges if edge[3]]
    print(f"function-level imports of {PACKAGE} modules: {len(inner)}")
    if args.list:
        for importer, imported, line, _ in inner:
            print(f"  {importer}:{line} -> {imported}")
    groups = cycles(edges)
    print(f"import cycles: {len(groups)}")
    for group in groups:
        print("  " + " <-> ".join(group))


if __name__ == "__main__":
    main()
