"""The shared cache tier of the man page and README, as shipped in
man/nginx-cache-tier.conf, run for real: nginx-light on 127.0.0.1 with that very
file, only its placeholders filled in (the origin, the cache directory, the port, and
proxy_cache_valid when a test wants it shorter), in front of an origin server.

`with SliceCache(origin_url) as c:` starts it; c.url is what mounts use; it stops by
PID on exit and removes its directory."""
import os
import re
import tempfile

from servers import NGINX_TEMP_PATHS, NGINX_TOP, NginxProcess

HERE = os.path.dirname(os.path.abspath(__file__))
RECIPE = os.path.join(HERE, "..", "..", "man", "nginx-cache-tier.conf")

MAIN_CONF = NGINX_TOP + """\
events {{ worker_connections 1024; }}
http {{
""" + NGINX_TEMP_PATHS + """\
    log_format tier '$request_uri\\t$http_range\\t$status\\t$upstream_cache_status';
    access_log {dir}/access.log tier;
    include {dir}/recipe.conf;
}}
"""


def recipe(origin_host_port, cache_dir, port, valid=None):
    """The shipped recipe with its placeholders filled in."""
    with open(RECIPE) as f:
        text = f.read()
    text = text.replace("proxy_pass http://ORIGIN;", "proxy_pass http://%s;" % origin_host_port)
    text = text.replace("/var/cache/nginx/ggufs", cache_dir)
    text = text.replace("listen 8080;", "listen 127.0.0.1:%d;" % port)
    if valid:
        text = re.sub(r"proxy_cache_valid 200 206 \S+;", "proxy_cache_valid 200 206 %s;" % valid,
                      text)
    return text


class SliceCache(NginxProcess):
    def __init__(self, origin_url, valid=None):
        self.origin = re.sub(r"^https?://", "", origin_url).rstrip("/")
        self.valid = valid
        self.dir = self.proc = self.port = self.url = None

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="ggufs-tier-")
        os.mkdir(os.path.join(self.dir, "tmp"))

        def write_conf(port):
            with open(os.path.join(self.dir, "recipe.conf"), "w") as f:
                f.write(recipe(self.origin, os.path.join(self.dir, "cache"), port, self.valid))
            with open(self.conf_path(), "w") as f:
                f.write(MAIN_CONF.format(dir=self.dir))
        self.start_nginx(write_conf)
        self.url = "http://127.0.0.1:%d" % self.port
        return self

    def records(self):
        """(uri, range, status, cache status) of each client request so far."""
        try:
            with open(os.path.join(self.dir, "access.log")) as f:
                return [tuple(line.rstrip("\n").split("\t")) for line in f]
        except FileNotFoundError:
            return []

