"""The compiled modules, built where a C compiler exists (``optional``: elsewhere the install goes
on and the pure-Python reference of each runs). Everything else is declared in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("broker.protocol.records.fields_c", ["broker/protocol/records/fields_c.pyx"], optional=True),
    Extension("broker.protocol.codecs_c", ["broker/protocol/codecs_c.pyx"], optional=True),
])
