"""Shared pytest configuration."""


def pytest_configure(config):
    config.addinivalue_line("markers", "model: needs the installed model package")
