-- wrk script for the enforced route (scripts/bench-enforced.sh).
--
--   wrk -t1 ... -s enforced.lua URL -- ASSERTIONS OFFSET STATE
--
-- ASSERTIONS: lines "<key ID> <assertion>" from `bench-mint assert` (round-robin over the keys,
-- counters increasing line by line for each key). Each request takes the next line, starting
-- at byte OFFSET, and sends it as X-App-Attest-Key-Id / X-App-Assertion with wrk's method and
-- path (the ones the assertions were minted for). When the file runs out, requests go without
-- the headers: the gateway refuses them (401), so they show as errors, never as passes.
-- done() writes "<next offset> <requests sent> <requests without assertion>" to STATE, so the
-- next wrk run continues after every assertion this one may have sent (each is used once).
-- One wrk thread only: two threads would interleave one key's counters out of order.

local threads = {}

function setup(thread)
    table.insert(threads, thread)
    if #threads > 1 then
        error("enforced.lua: run wrk with -t1 (one thread keeps each key's counters in order)")
    end
end

-- Globals of the thread's Lua state (read back by done() through thread:get).
offset = 0
sent = 0
missing = 0
state_path = ""
local file

function init(args)
    if #args < 3 then
        error("enforced.lua: arguments ASSERTIONS OFFSET STATE expected after --")
    end
    file = assert(io.open(args[1], "rb"))
    offset = assert(tonumber(args[2]), "OFFSET must be a number")
    state_path = args[3]
    assert(file:seek("set", offset))
end

function request()
    local line = file:read("*l")
    if line == nil or line == "" then
        missing = missing + 1
        return wrk.format(nil, nil)
    end
    offset = offset + #line + 1
    sent = sent + 1
    local space = line:find(" ", 1, true)
    return wrk.format(nil, nil, {
        ["X-App-Attest-Key-Id"] = line:sub(1, space - 1),
        ["X-App-Assertion"] = line:sub(space + 1),
    })
end

function done(summary, latency, requests)
    local t = threads[1]
    local out = assert(io.open(t:get("state_path"), "w"))
    out:write(string.format("%d %d %d\n", t:get("offset"), t:get("sent"), t:get("missing")))
    out:close()
end
