"""HTTPS options (issue 14): what --tls-port, --tls-cert/--tls-key, --tls-min, --hsts and
--redirect-https refuse, each with one line naming the option and exit status 2."""
import subprocess

import pytest

from conftest import RINGHTTPD


@pytest.fixture
def engine():
    return "auto"  # option parsing happens before any engine runs


@pytest.mark.parametrize("args, says", [
    (["--tls-port", "8443"], "--tls-port needs a --tls-cert"),
    (["--tls-port", "99999", "--tls-cert", "c", "--tls-key", "k"], "--tls-port wants"),
    (["--tls-cert", "c", "--tls-key", "k"], "--tls-cert 'c' needs --tls-port"),
    (["--tls-port", "8443", "--tls-cert", "c"], "--tls-cert 'c' has no --tls-key"),
    (["--tls-port", "8443", "--tls-key", "k"], "--tls-key 'k' follows no --tls-cert"),
    (["--tls-port", "8443", "--tls-cert", "c", "--tls-key", "k", "--tls-key", "k2"],
     "--tls-key 'k2' follows no --tls-cert"),
    (["--tls-port", "8443", "--tls-cert", "c", "--tls-cert", "d", "--tls-key", "k"],
     "--tls-cert 'd': the --tls-cert before it has no --tls-key"),
    (["--tls-port", "8443", "--tls-cert", "c", "--tls-key", "k", "--tls-min", "1.1"],
     "--tls-min wants 1.2 or 1.3"),
    (["--tls-port", "8443", "--tls-cert", "c", "--tls-key", "k", "--hsts", "-1"],
     "--hsts wants"),
    (["--hsts", "300"], "--hsts needs --tls-port"),
    (["--redirect-https"], "--redirect-https needs --tls-port"),
    (["-p", "8443", "--tls-port", "8443", "--tls-cert", "c", "--tls-key", "k"],
     "--tls-port must differ from --port"),
])
def test_bad_tls_options_exit_2_naming_the_option(args, says, tmp_path):
    p = subprocess.run([RINGHTTPD, *args, str(tmp_path)], capture_output=True, text=True,
                       timeout=10)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], p.stderr

