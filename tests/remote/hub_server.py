"""A Hugging Face hub repository on loopback for the tests: HubServer, a FaultServer
(fault_server.py) serving a folder under the hub's routes."""
import hashlib
import json
import os

from fault_server import FaultServer


class HubServer(FaultServer):
    """`with HubServer("owner/repo") as hub: hub.commit(folder)` serves a folder as a
    Hugging Face hub repository at hub.url (HF_ENDPOINT), under the hub's routes:

    - GET /api/models/OWNER/REPO/revision/REV: {"id", "sha", "lastModified"} (REV main,
      or a commit);
    - GET /api/models/OWNER/REPO/tree/REV[/PATH]?recursive=true: every file and folder
      under PATH as huggingface_hub's list_repo_tree reads them ({"type": "file" or
      "directory", "oid", "size", "path", and for .gguf files "lfs": {"oid": sha256,
      "size", "pointerSize"}}), page_size entries a page, each page but the last with
      a Link: <URL&cursor=N>; rel="next" header;
    - GET /OWNER/REPO/resolve/REV/PATH: the bytes (Range honoured), with X-Repo-Commit.

    commit(folder) makes the folder's files the next commit and points main at it (the
    older commits stay served by their sha): a repository that changes after a mount.
    Every FaultServer switch applies (token, fail_next, latency, rate, ...)."""

    def __init__(self, repo="owner/repo", page_size=3, host="127.0.0.1"):
        super().__init__({}, host=host)
        self.repo = repo
        self.page_size = page_size
        self.by_query = True
        self.commits = []

    @staticmethod
    def read_folder(folder):
        """{relative path: bytes} of every file under folder."""
        out = {}
        for dirpath, _, names in os.walk(folder):
            for n in names:
                p = os.path.join(dirpath, n)
                with open(p, "rb") as f:
                    out[os.path.relpath(p, folder)] = f.read()
        return out

    def entries(self, files):
        """The tree API's entries of files ({path: bytes}), folders included, by path."""
        dirs = set()
        for path in files:
            parts = path.split("/")
            for k in range(1, len(parts)):
                dirs.add("/".join(parts[:k]))
        out = [{"type": "directory", "oid": hashlib.sha1(d.encode()).hexdigest(), "size": 0,
                "path": d} for d in dirs]
        for path, data in files.items():
            e = {"type": "file", "oid": hashlib.sha1(data).hexdigest(), "size": len(data),
                 "path": path}
            if path.endswith(".gguf"):
                e["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data),
                            "pointerSize": 134}
            out.append(e)
        return sorted(out, key=lambda e: e["path"])

    def serve_tree(self, rev, entries, folder):
        """The pages of the listing of folder ("" for the root) at rev."""
        from urllib.parse import quote
        under = [e for e in entries if not folder or e["path"].startswith(folder + "/")]
        base = "/api/models/%s/tree/%s%s?recursive=true" % (
            self.repo, rev, "/" + quote(folder, safe="/") if folder else "")
        pages = [under[i:i + self.page_size] for i in range(0, len(under), self.page_size)] or [[]]
        for k, page in enumerate(pages):
            key = base + ("&cursor=%d" % k if k else "")
            headers = []
            if k + 1 < len(pages):
                headers = [("Link", '<%s%s&cursor=%d>; rel="next"' % (self.url, base, k + 1))]
            self.swap(key, json.dumps(page).encode(), headers)

    def commit_date(self, k):
        """The date of commit k (from 0) as the revision API gives it (lastModified):
        2024-04-18T09:54:19.000Z, then a day later each."""
        import datetime
        d = datetime.datetime(2024, 4, 18, 9, 54, 19) + datetime.timedelta(days=k)
        return d.strftime("%Y-%m-%dT%H:%M:%S.000Z")

    def commit(self, folder=None, files=None, last_commits=None):
        """The files of folder (or files, {path: bytes}) as the next commit, main's;
        last_commits ({path: ISO date}) gives those entries a "lastCommit" in the tree
        API, as its expand=true listing does."""
        from urllib.parse import quote
        files = files if files is not None else self.read_folder(folder)
        sha = hashlib.sha1(("%d" % len(self.commits)).encode() +
                           b"".join(k.encode() + v for k, v in sorted(files.items()))).hexdigest()
        self.commits.append(sha)
        entries = self.entries(files)
        for e in entries:
            if e["path"] in (last_commits or {}):
                e["lastCommit"] = {"id": sha, "title": "a commit",
                                   "date": last_commits[e["path"]]}
        folders = [""] + [e["path"] for e in entries if e["type"] == "directory"]
        date = self.commit_date(len(self.commits) - 1)
        for rev in (sha, "main"):
            body = json.dumps({"id": self.repo, "sha": sha, "lastModified": date}).encode()
            self.swap("/api/models/%s/revision/%s" % (self.repo, rev), body)
            for f in folders:
                self.serve_tree(rev, entries, f)
            for path, data in files.items():
                self.swap("/%s/resolve/%s/%s" % (self.repo, rev, quote(path, safe="/")), data,
                          [("X-Repo-Commit", sha)])
        return sha
