-- wrk script of `make bench`: GET of random seeded ids, or POST of unique bodies.
--   wrk ... -s bench/load.lua URL -- get  API_KEY IDS_FILE SEED [check]
--   wrk ... -s bench/load.lua URL -- post API_KEY RUN_TAG  SEED [check]
--   wrk ... -s bench/load.lua URL -- patch API_KEY PATH    SEED [check|-] [HOST]  (a new description each time)
-- done() prints one JSON line that bench/run.py reads. wrk itself counts every response that is not
-- 2xx or 3xx; with `check` (the warm-up runs), a response other than 200 (GET) or 201 (POST) also
-- counts as unexpected. Only then is response() defined: wrk hands every response's headers and
-- body to it once it exists, which took a quarter of wrk's CPU, and wrk shares the machine's cores with
-- the server it measures. For the same reason every GET request is formatted once, here in init().

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
    gets = {}
    for line in io.lines(source) do
      gets[#gets + 1] = wrk.format("GET", "/identity/" .. line, headers)
    end
  elseif mode == "patch" then
    expected = 200
    headers = {["x-api-key"] = args[2], ["Content-Type"] = "application/json", ["Host"] = args[6]}
    source = source .. "?" .. math.random(1, 1000000000)
  else
    expected = 201
    headers = {["x-api-key"] = args[2], ["Content-Type"] = "application/json"}
    -- A random part on top of the run tag, so that no two runs ever send the same content (409).
    source = source .. "-" .. math.random(1, 1000000000)
  end
  if args[5] == "check" then
    response = check_status
  end
end

function request()
  if mode == "get" then
    return gets[math.random(#gets)]
  end
  counter = counter + 1
  if mode == "patch" then
    local path, tag = source:match("^(.*)%?(.*)$")
    return wrk.format("PATCH", path, headers, '{"description":"bench ' .. tag .. '-' .. counter .. '"}')
  end
  local n = source .. "-" .. counter
  local body = '{"display_name":"Bench ' .. n .. '","description":"Identity ' .. n
    .. ', made by the benchmark.","image":"https://example.org/avatars/' .. n
    .. '.png","external_reference":"https://example.org/people/' .. n .. '"}'
  return wrk.format("POST", "/identity", headers, body)
end

function check_status(status, headers, body)
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
