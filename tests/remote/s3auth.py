"""S3's side of a request, for the fault server (fault_server.py, FaultServer.s3): the
object a request names (path style or virtual-hosted) and whether its Signature V4 is
right, recomputed by an independent signer, Debian's python3-botocore
(botocore.auth.S3SigV4Auth), from what arrived.

The signature is recomputed as S3 does, from the request's meaning rather than its
bytes: the key decoded from the path and encoded again by S3's rules (every byte but
A-Z a-z 0-9 - . _ ~ and '/'), the query's parameters decoded and handed to botocore,
which sorts and encodes them itself. A client that signs a path or query in any other
form (a '+' or space left raw, lower-case hex, a query unsorted) gets S3's
SignatureDoesNotMatch, where a lenient server would have let it through."""
import base64
import datetime
import email.utils
import hashlib
import hmac
import re
import threading
import urllib.parse
from xml.sax.saxutils import escape

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
AUTH_RE = re.compile(r"AWS4-HMAC-SHA256 Credential=([^/,\s]+)/(\d{8})/([^/,\s]+)/s3/aws4_request,"
                     r"\s*SignedHeaders=([a-z0-9;-]+),\s*Signature=([0-9a-f]{64})")


def error_xml(code, fields=()):
    """S3's error document for code, with (name, value) fields after Code and Message."""
    extra = "".join("<%s>%s</%s>" % (k, escape(v), k) for k, v in fields)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code><Message>%s'
            '</Message>%s<RequestId>ggufs-test</RequestId></Error>'
            % (code, escape(code + " (test server)"), extra)).encode()


def canonical_path(path):
    """The path as S3 reads it and signs it: decoded, then encoded by S3's rules."""
    return urllib.parse.quote(urllib.parse.unquote_to_bytes(path), safe="/~")


def query_params(query):
    """The query's (name, value) pairs, decoded ('+' is a plus: S3 reads it so)."""
    out = []
    for part in query.split("&") if query else []:
        name, _, value = part.partition("=")
        out.append((urllib.parse.unquote(name, errors="strict"),
                    urllib.parse.unquote(value, errors="strict")))
    return out


class S3Auth:
    """S3's rules for one fault server.

    credentials: {access key id: (secret, session token or None)}; region: the buckets'
    region (a request signed for another gets AuthorizationHeaderMalformed, naming it);
    vhost_suffix: a Host of BUCKET.SUFFIX[:PORT] names the bucket (virtual-hosted),
    anything else is path style (/BUCKET/KEY); anonymous: unsigned requests are served
    (a public bucket), else refused with AccessDenied; moved = REGION: every request
    gets 301 PermanentRedirect (x-amz-bucket-region: REGION), as a bucket of another
    region's endpoint does.

    Listings (GET /BUCKET?list-type=2&prefix=&delimiter=/&continuation-token=): S3's
    ListObjectsV2 XML, page_size keys and common prefixes per page, in S3's order; the
    continuation token is opaque base64 (holding '+', '/', '='); between_pages(n), when
    set, is called before page n > 0 is made (a listing that changes between pages).
    With encoding-type=url in the query, keys and prefixes are sent URL-encoded as S3
    does (a space as '+', '/' as itself) and <EncodingType>url</EncodingType> comes
    after the entries, as MinIO places it; url_encoding = False: the parameter is
    ignored and keys go raw, as s3rver does. mtime_shift = S: each entry's
    LastModified S seconds off the object's; mtime_absent: none. tokens_cycle: every
    page is truncated and its token alternates between two values (a hostile
    endpoint that pages for ever).
    lists: the query of every listing request that passed the signature check.

    After requests: verified (count of good signatures), refused [(code, what)],
    signed_headers [the SignedHeaders list of each good one], tokens [x-amz-security-
    token of each good one], paths [the raw path and query of each good one]."""

    def __init__(self, credentials, region="us-east-1", vhost_suffix="localhost",
                 anonymous=False):
        self.credentials = dict(credentials)
        self.region = region
        self.vhost_suffix = vhost_suffix
        self.anonymous = anonymous
        self.moved = None
        self.page_size = 1000
        self.between_pages = None
        self.url_encoding = True
        self.mtime_shift = 0
        self.mtime_absent = False
        self.tokens_cycle = False
        self.lists = []
        self.lock = threading.Lock()
        self.verified = 0
        self.refused = []
        self.signed_headers = []
        self.tokens = []
        self.paths = []

    def object_path(self, host, path):
        """'/BUCKET/KEY' (KEY decoded, as text) that a request names."""
        name = host.rsplit(":", 1)[0] if not host.startswith("[") else host
        key = urllib.parse.unquote_to_bytes(path).decode("utf-8", "replace")
        suffix = "." + self.vhost_suffix
        if name.endswith(suffix) and len(name) > len(suffix):
            return "/" + name[:-len(suffix)] + key
        return key

    def listing(self, files, bucket, query):
        """The ListObjectsV2 page that query asks for over files ({'/B/K': ServedFile})."""
        params = dict(query_params(query))
        prefix, delim = params.get("prefix", ""), params.get("delimiter", "")
        after = params.get("continuation-token")
        encode = self.url_encoding and params.get("encoding-type") == "url"
        shown = (lambda k: urllib.parse.quote_plus(k, safe="/")) if encode else (lambda k: k)
        if self.tokens_cycle:
            after = None
        start = base64.b64decode(after.encode())[2:].decode() if after else None
        if after and self.between_pages:
            self.between_pages(len([q for q in self.lists if "continuation-token" in q]))
        rows = {}
        for path, f in list(files.items()):
            b, _, key = path[1:].partition("/")
            if b != bucket or not key.startswith(prefix):
                continue
            rest = key[len(prefix):]
            if delim and delim in rest:
                p = prefix + rest[:rest.index(delim) + 1]
                rows[p] = None
            else:
                rows[key] = f
        names = sorted(rows)
        if start is not None:
            names = [n for n in names if n > start]
        page, more = names[:self.page_size], len(names) > self.page_size
        if self.tokens_cycle:
            more = True
        out = ['<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns='
               '"http://s3.amazonaws.com/doc/2006-03-01/"><Name>%s</Name><Prefix>%s</Prefix>'
               '<KeyCount>%d</KeyCount><MaxKeys>%d</MaxKeys><Delimiter>%s</Delimiter>'
               '<IsTruncated>%s</IsTruncated>' % (escape(bucket), escape(shown(prefix)), len(page),
                                                 self.page_size, escape(shown(delim)),
                                                 "true" if more else "false")]
        for n in page:
            f = rows[n]
            if f is None:
                out.append("<CommonPrefixes><Prefix>%s</Prefix></CommonPrefixes>"
                           % escape(shown(n)))
            else:
                when = datetime.datetime.fromtimestamp(f.mtime + self.mtime_shift,
                                                       datetime.timezone.utc)
                modified = ("" if self.mtime_absent else "<LastModified>%s</LastModified>"
                            % when.strftime("%Y-%m-%dT%H:%M:%S.000Z"))
                out.append("<Contents><Key>%s</Key>%s<ETag>%s</ETag><Size>%d</Size>"
                           "<StorageClass>STANDARD</StorageClass></Contents>"
                           % (escape(shown(n)), modified, escape(f.etag), len(f.content)))
        if encode:
            out.append("<EncodingType>url</EncodingType>")
        if more:
            # opaque, as S3's: base64, so '+', '/' and '=' go into the next query
            token = base64.b64encode(b"\xfb\xff" + page[-1].encode()).decode()
            if self.tokens_cycle:
                token = "QUFB" if params.get("continuation-token") != "QUFB" else "QkJC"
            out.append("<NextContinuationToken>%s</NextContinuationToken>" % token)
        out.append("</ListBucketResult>")
        return "".join(out).encode()

    def refuse(self, status, code, what, fields=(), extra=()):
        """Notes a refusal; returns what FaultServer answers with."""
        with self.lock:
            self.refused.append((code, what))
        return status, code, list(fields), list(extra)

    def check(self, method, headers, raw_path):
        """None when the request may be served, else (status, S3 code, the error
        document's fields, headers)."""
        if self.moved:
            return self.refuse(301, "PermanentRedirect", "moved",
                               [("Endpoint", "s3.%s.amazonaws.com" % self.moved)],
                               [("x-amz-bucket-region", self.moved)])
        auth = headers.get("authorization")
        if auth is None:
            if self.anonymous:
                return None
            return self.refuse(403, "AccessDenied", "anonymous request")
        m = AUTH_RE.fullmatch(auth.strip())
        if not m:
            return self.refuse(400, "AuthorizationHeaderMalformed", "unreadable: " + auth[:40])
        akid, day, region, signed, signature = m.groups()
        if akid not in self.credentials:
            return self.refuse(403, "InvalidAccessKeyId", akid)
        if region != self.region:
            return self.refuse(400, "AuthorizationHeaderMalformed", "region " + region,
                               [("Region", self.region)])
        secret, token = self.credentials[akid]
        amz_date = headers.get("x-amz-date", "")
        try:
            when = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(
                tzinfo=datetime.timezone.utc)
        except ValueError:
            return self.refuse(403, "AccessDenied", "no X-Amz-Date")
        now = datetime.datetime.now(datetime.timezone.utc)
        if abs((now - when).total_seconds()) > 900 or amz_date[:8] != day:
            return self.refuse(403, "RequestTimeTooSkewed", amz_date)
        names = signed.split(";")
        if names != sorted(names):
            return self.refuse(403, "SignatureDoesNotMatch", "SignedHeaders unsorted")
        for need in ("host", "x-amz-date", "x-amz-content-sha256"):
            if need not in names:
                return self.refuse(403, "AccessDenied", need + " not signed")
        for h in headers:  # S3 wants every x-amz-* header signed
            if h.startswith("x-amz-") and h not in names:
                return self.refuse(403, "AccessDenied", h + " not signed")
        if any(h not in headers for h in names):
            return self.refuse(403, "SignatureDoesNotMatch", "a signed header is absent")
        payload = headers["x-amz-content-sha256"]
        if method in ("GET", "HEAD") and payload not in ("UNSIGNED-PAYLOAD", EMPTY_SHA256):
            return self.refuse(400, "XAmzContentSHA256Mismatch", payload)
        if token is not None and headers.get("x-amz-security-token") != token:
            return self.refuse(403, "InvalidToken", "session token")
        path, _, query = raw_path.partition("?")
        try:
            params = query_params(query)
        except UnicodeDecodeError:
            return self.refuse(400, "InvalidArgument", "query not UTF-8")
        request = AWSRequest(method=method, url="http://" + headers["host"] + canonical_path(path),
                             headers={h: headers[h] for h in names}, params=params)
        request.context["timestamp"] = amz_date
        signer = S3SigV4Auth(Credentials(akid, secret, token), "s3", region)
        canonical = signer.canonical_request(request)
        expected = signer.signature(signer.string_to_sign(request, canonical), request)
        if not hmac.compare_digest(expected, signature):
            return self.refuse(403, "SignatureDoesNotMatch", raw_path)
        with self.lock:
            self.verified += 1
            self.signed_headers.append(names)
            self.tokens.append(headers.get("x-amz-security-token"))
            self.paths.append(raw_path)
            if "list-type=2" in query:
                self.lists.append(query)
        return None
