"""The compiled modules, built where a C compiler exists (``optional``: elsewhere the install goes
on and the pure-Python reference of each runs). Everything else is declared in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("broker.protocol.records.fields_c", ["broker/protocol/records/fields_c.pyx"], optional=True),
    Extension("broker.protocol.produce_c", ["broker/protocol/produce_c.pyx"], optional=True),
])
