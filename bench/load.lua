-- wrk script of `make bench`: GET of random seeded ids, or POST of unique bodies.
--   wrk ... -s bench/load.lua URL -- get  API_KEY IDS_FILE SEED
--   wrk ... -s bench/load.lua URL -- post API_KEY RUN_TAG  SEED
-- A response other than 200 (GET) or 201 (POST) counts as unexpected; done() prints one JSON line
-- that bench/run.py reads.

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  mode, source = args[1], args[3]
  math.randomseed(tonumber(args[4]))
  unexpected = 0
  counter = 0
  if mode == "get" then
    expected = 200
    headers = {["x-api-key"] = args[2]}
    ids = {}
    for line in io.lines(source) do
      ids[#ids + 1] = line
    end
  else
    expected = 201
    headers = {["x-api-key"] = args[2], ["Content-Type"] = "application/json"}
    -- A random part on top of the run tag, so that no two runs ever send the same content (409).
    source = source .. "-" .. math.random(1, 1000000000)
  end
end

function request()
  if mode == "get" then
    return wrk.format("GET", "/identity/" .. ids[math.random(#ids)], headers)
  end
  counter = counter + 1
  local n = source .. "-" .. counter
  local body = '{"display_name":"Bench ' .. n .. '","description":"Identity ' .. n
    .. ', made by the benchmark.","image":"https://example.org/avatars/' .. n
    .. '.png","external_reference":"https://example.org/people/' .. n .. '"}'
  return wrk.format("POST", "/identity", headers, body)
end

function response(status, headers, body)
  if status ~= expected then
    unexpected = unexpected + 1
  end
end

function done(summary, latency, requests)
  local bad = 0
  for _, thread in ipairs(threads) do
    bad = bad + thread:get("unexpected")
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests": %d, "duration_us": %d, "p50_us": %.0f, "p99_us": %.0f, "max_us": %.0f, '
      .. '"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d, "unexpected": %d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), latency.max,
    e.connect, e.read, e.write, e.status, e.timeout, bad))
end
