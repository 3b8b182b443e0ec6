"""The hosts' own test counts (test_host_suites.py) in the run's summary: recorded as
each test's user property, which pytest-xdist hands back from its workers."""

from __future__ import annotations

_lines: list[str] = []


def pytest_runtest_logreport(report):
    if report.when == "call":
        _lines.extend(value for name, value in report.user_properties if name == "host_suite")


def pytest_terminal_summary(terminalreporter):
    if _lines:
        terminalreporter.section("the hosts' own tests, without and with kafkawire's drop-in")
        for line in _lines:
            terminalreporter.write_line(line)
