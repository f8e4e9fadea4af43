"""slackopt's tests: one package, so that helper modules are imported by name
(``from tests.helpers import build``) and no test changes sys.path."""
