"""What the tests of every tier share: builders of landings and records (`helpers`,
`records`, `generators`), the reference model, and the throwaway servers the fixtures
start (`s3server`, `brokers`, `cluster`, `delivery_helpers`' webhook receiver); also
`crash_child`, a run that kills itself. `tests/` is on pytest's path (pyproject.toml):
`from support.helpers import ...`."""
