import socket, json, base64, os, hashlib, sys
port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", port)); f = s.makefile("rb")
def cmd(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    s.sendall(out)
    line = f.readline()
    if line[:1] == b"$":
        n = int(line[1:]); return None if n < 0 else f.read(n + 2)[:-2]
    return line.strip()
vec = json.load(open("/work/shared/vectors/attestations.json"))["vectors"][0]
rc = json.load(open("/work/shared/vectors/receipts.json"))["vectors"][0]
receipt = base64.b64decode(rc["receipt"])
print("receipt bytes", len(receipt))
def record(i, b64):
    pub = os.urandom(65)
    kid = base64.b64encode(hashlib.sha256(pub).digest()).decode()
    key = "appattest:key:{%s}" % kid
    cmd("HSET", key, "public_key", base64.b64encode(pub) if b64 else pub, "counter", 1234,
        "app_id", "ABCDE12345.com.example.app", "environment", "production",
        "receipt", base64.b64encode(receipt) if b64 else receipt,
        "attested_at", "1763772000", "status", "active")
    return key
for b64 in (False, True):
    cmd("FLUSHALL")
    before = int([l for l in cmd("INFO", "memory").decode().split("\r\n") if l.startswith("used_memory:")][0].split(":")[1])
    keys = [record(i, b64) for i in range(2000)]
    after = int([l for l in cmd("INFO", "memory").decode().split("\r\n") if l.startswith("used_memory:")][0].split(":")[1])
    print("b64" if b64 else "binary", "MEMORY USAGE", cmd("MEMORY", "USAGE", keys[0], "SAMPLES", "0"), "per-key from INFO delta", (after-before)/2000, "encoding", cmd("OBJECT","ENCODING",keys[0]))
cmd("FLUSHALL")
before = int([l for l in cmd("INFO", "memory").decode().split("\r\n") if l.startswith("used_memory:")][0].split(":")[1])
chs=[]
for i in range(20000):
    ch = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
    k = "appattest:ch:{%s}" % ch
    cmd("SET", k, "1", "EX", "300", "NX"); chs.append(k)
after = int([l for l in cmd("INFO", "memory").decode().split("\r\n") if l.startswith("used_memory:")][0].split(":")[1])
print("challenge MEMORY USAGE", cmd("MEMORY", "USAGE", chs[0]), "per-challenge from INFO delta", (after-before)/20000)
