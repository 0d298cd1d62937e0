# --profile for tests/workloads/ops_toy.py (format: docs/profiles.md)
module  Module.__call__      */ops_toy.py  self
op      Dispatcher.__call__  */ops_toy.py  arg1  args=2
