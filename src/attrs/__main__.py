from psyattrs.cli import console

console()
