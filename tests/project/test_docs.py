"""The README's configuration table and links stay true to the code."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import click

from nova_queue.cli import cli
from nova_queue.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def table_rows() -> dict[str, list[str]]:
    rows = {}
    for line in README.splitlines():
        if line.startswith("| `NOVA_"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[re.match(r"`(NOVA_\w+)`", cells[0]).group(1)] = cells
    return rows


def test_every_setting_is_in_the_table_with_its_default():
    rows = table_rows()
    for field in dataclasses.fields(Settings):
        env = "NOVA_" + field.name.upper()
        assert env in rows, f"{env} missing from the README configuration table"
        default = rows[env][2]
        if isinstance(field.default, (int, float)) and not isinstance(field.default, bool) or field.default and field.name not in ("store_url", "home"):
            assert f"`{field.default}`" in default, (env, default, field.default)


def _commands(group: click.Group):
    yield group
    for cmd in group.commands.values():
        yield from (_commands(cmd) if isinstance(cmd, click.Group) else [cmd])


def test_every_env_var_of_a_cli_option_is_documented():
    rows = table_rows()
    for cmd in _commands(cli):
        for param in cmd.params:
            envvars = param.envvar if isinstance(param.envvar, list) else [param.envvar]
            for env in filter(None, envvars):
                if env.startswith("NOVA_"):
                    assert env in rows, f"{env} ({cmd.name} {param.opts}) not in the README table"


def test_flag_column_names_real_flags():
    rows = table_rows()
    for env, cells in rows.items():
        for flag in re.findall(r"`(?:(\w[\w-]*) )?(--[\w-]+)`", cells[1]):
            command, option = flag
            target = cli.commands[command] if command else cli
            opts = {o for p in target.params for o in p.opts}
            assert option in opts, f"{env}: {command or 'nova-queue'} has no {option}"


def test_relative_links_point_at_files():
    for path in re.findall(r"\]\((?!https?:)([^)#]+)\)", README):
        assert (ROOT / path).exists(), f"README links to missing {path}"


def test_readme_sections_in_the_agreed_order():
    headings = [h for h in re.findall(r"^## (.+)$", README, re.MULTILINE)]
    order = ["Quickstart", "docker compose", "Many machines", "Architecture", "Guarantees",
             "Configuration", "Benchmarks", "Development"]
    positions = [headings.index(h) for h in order]
    assert positions == sorted(positions)
