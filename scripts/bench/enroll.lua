-- wrk script for the enrollment rows (scripts/bench-android.sh).
--
--   wrk -t1 -cN -d<cap> ... -s enroll.lua URL -- BODIES STATE
--
-- BODIES: one POST /app-attest/attest body a line (App Attest's {"key_id","attestation",
-- "challenge"} from `bench-mint attest`, or Android's {"platform":"android",...} from
-- `bench-mint android-enroll`), each over its own fresh challenge. Each request sends the next
-- body once. Once every body is sent, the few connections still asking get GET /bench-off (the
-- passthrough route) until the last enrollment's answer is in. Then the script writes
-- "<201 answers> <other answers> <µs from the first request to the last answer>" to STATE and
-- stops the thread; wrk itself sleeps out -d, so the caller sends it SIGINT once STATE exists.
-- A body whose answer never comes (its connection lost) ends the run 3 s after the last answer,
-- created + refused short of the bodies: the caller reports the row as not valid. If the script
-- never finishes, done() writes STATE at the end of -d. One wrk thread only.

local ffi = require("ffi")
ffi.cdef [[
    typedef struct { long tv_sec; long tv_nsec; } enroll_timespec;
    int clock_gettime(int clock, enroll_timespec *out);
]]
local now_spec = ffi.new("enroll_timespec")
local function now_us()
    ffi.C.clock_gettime(1, now_spec) -- CLOCK_MONOTONIC
    return tonumber(now_spec.tv_sec) * 1000000 + tonumber(now_spec.tv_nsec) / 1000
end

local threads = {}

function setup(thread)
    table.insert(threads, thread)
    if #threads > 1 then
        error("enroll.lua: run wrk with -t1")
    end
end

created = 0
refused = 0
elapsed = 0
finished = false
state_path = ""
local total = 0
local sent = 0
local started = nil
local last_answer = nil
local bodies = {}

function init(args)
    if #args < 2 then
        error("enroll.lua: arguments BODIES STATE expected after --")
    end
    for line in io.lines(args[1]) do
        if line ~= "" then
            table.insert(bodies, line)
        end
    end
    total = #bodies
    state_path = args[2]
end

-- wrk calls request() once on thread 0's state before any connection opens, to check the script
-- (script_verify_request); that request is never sent, so it must not take a body.
local checked = false

function request()
    if not checked then
        checked = true
        return wrk.format("GET", "/bench-off")
    end
    if started == nil then
        started = now_us()
        last_answer = started
    end
    if sent < total then
        sent = sent + 1
        return wrk.format("POST", "/app-attest/attest", { ["Content-Type"] = "application/json" }, bodies[sent])
    end
    return wrk.format("GET", "/bench-off")
end

local function write_state()
    local out = assert(io.open(state_path, "w"))
    out:write(string.format("%d %d %d\n", created, refused, elapsed))
    out:close()
end

-- 201: an enrollment accepted; 200: a passthrough filler (ignored); anything else is a refusal
-- (of an enrollment, or a filler that failed): the row is then not a valid measurement.
function response(status, headers, body)
    if finished then
        return
    end
    local t = now_us()
    if status == 201 then
        created = created + 1
        last_answer = t
    elseif status ~= 200 then
        refused = refused + 1
        last_answer = t
    end
    if created + refused >= total or (sent >= total and t - last_answer >= 3000000) then
        finished = true
        elapsed = last_answer - started
        write_state()
        wrk.thread:stop()
    end
end

function done(summary, latency, requests)
    local t = threads[1]
    if not t:get("finished") then
        local out = assert(io.open(t:get("state_path"), "w"))
        out:write(string.format("%d %d %d\n", t:get("created"), t:get("refused"), summary.duration))
        out:close()
    end
end
