%% procs.escript -- Erlang/OTP's BEAM (its JIT runs Erlang code with the
%% stack pointer in each process's own stack, right above its heap) doing
%% work whose results it checks itself. Run by erlang.sh natively and under
%% bobbin: one line per part, the last one "ok". Argument: scale.
-mode(compile).

main([ScaleArg]) ->
    Scale = list_to_integer(ScaleArg),
    R = [ring(50000 * Scale, 5), compute(Scale), ets_part(Scale),
         timers(), files(Scale), ports(), tcp(Scale)],
    case lists:all(fun(X) -> X end, R) of
        true -> io:format("ok~n");
        false -> io:format("FAILED~n"), halt(1)
    end.

check(What, Got, Want) ->
    Ok = Got =:= Want,
    io:format("~s ~s~n", [What, case Ok of true -> "ok"; false -> io_lib:format("FAIL got ~p want ~p", [Got, Want]) end]),
    Ok.

%% a token round a ring of N processes, Laps times
ring(N, Laps) ->
    Self = self(),
    First = spawn(fun() -> receive {init, Next} -> ring_first(Self, Next) end end),
    Last = lists:foldl(fun(I, Next) -> spawn(fun() -> ring_node(I, Next) end) end,
                       First, lists:seq(2, N)),
    First ! {init, Last},
    Last ! {tok, Laps, 0},
    Got = receive {done, S} -> S after 60000 -> timeout end,
    check("ring", Got, ring_want(N, Laps)).

ring_first(Parent, Next) ->
    receive
        {tok, 1, S} -> Parent ! {done, S + 1}, Next ! stop;
        {tok, L, S} -> Next ! {tok, L - 1, (S * 31 + 1) rem 1000000007}, ring_first(Parent, Next)
    end.
ring_node(I, Next) ->
    receive
        {tok, L, S} -> Next ! {tok, L, (S * 31 + I) rem 1000000007}, ring_node(I, Next);
        stop -> Next ! stop
    end.

%% the same arithmetic, in one process
ring_want(N, Laps) ->
    Lap = fun(S0) -> lists:foldl(fun(I, S) -> (S * 31 + I) rem 1000000007 end, S0,
                                lists:seq(N, 2, -1)) end,
    ring_want(Lap, Laps, 0).
ring_want(Lap, 1, S) -> Lap(S) + 1;
ring_want(Lap, L, S) -> ring_want(Lap, L - 1, (Lap(S) * 31 + 1) rem 1000000007).

%% sorting and hashing in 100 processes, each with a heap of its own that
%% grows to a few MB (lists of 20,000); five results computed again here,
%% and a digest of all of them printed (the native run's must match)
compute(Scale) ->
    Work = fun(K) ->
                   rand:seed(exsss, {K, K * 2, K * 3}),
                   L = lists:sort([rand:uniform(1000000) || _ <- lists:seq(1, 10000 * Scale)]),
                   lists:foldl(fun(_, Acc) -> crypto:hash(sha256, Acc) end,
                               term_to_binary(L), lists:seq(1, 200))
           end,
    Self = self(),
    Pids = [spawn(fun() -> Self ! {self(), Work(K)} end) || K <- lists:seq(1, 100)],
    Got = [receive {P, H} -> H end || P <- Pids],
    io:format("digest ~s~n", [binary:encode_hex(crypto:hash(md5, term_to_binary(Got)))]),
    check("sort and hash", lists:sublist(Got, 5), [Work(K) || K <- lists:seq(1, 5)]).

%% a public ETS table hammered by 200 processes
ets_part(Scale) ->
    T = ets:new(t, [public, set, {write_concurrency, true}, {read_concurrency, true}]),
    Self = self(),
    Ops = 1000 * Scale,
    Pids = [spawn(fun() ->
                          [ets:update_counter(T, K rem 50, {2, 1}, {K rem 50, 0}) || K <- lists:seq(1, Ops)],
                          Self ! {self(), done}
                  end) || _ <- lists:seq(1, 200)],
    [receive {P, done} -> ok end || P <- Pids],
    Got = lists:sum([C || {_, C} <- ets:tab2list(T)]),
    check("ets counters", Got, 200 * Ops).

%% 2,000 processes each waiting 1-50 ms
timers() ->
    Self = self(),
    [spawn(fun() -> receive after (I rem 50) + 1 -> Self ! fired end end) || I <- lists:seq(1, 2000)],
    Got = lists:sum([receive fired -> 1 after 10000 -> 0 end || _ <- lists:seq(1, 2000)]),
    check("timers", Got, 2000).

%% 100 files written and read back by 100 processes (dirty I/O schedulers)
files(Scale) ->
    Dir = filename:join(os:getenv("REAL_WORK", "/tmp"), "erlfiles"),
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    Self = self(),
    Body = fun(I) -> list_to_binary([integer_to_list(I * J) || J <- lists:seq(1, 500 * Scale)]) end,
    Pids = [spawn(fun() ->
                          F = filename:join(Dir, integer_to_list(I)),
                          ok = file:write_file(F, Body(I)),
                          {ok, B} = file:read_file(F),
                          Self ! {self(), B =:= Body(I)}
                  end) || I <- lists:seq(1, 100)],
    Got = [receive {P, R} -> R end || P <- Pids],
    check("files", lists:usort(Got), [true]).

%% external programs through ports, their exit statuses
ports() ->
    Run = fun(I) ->
                  P = open_port({spawn, "sh -c 'echo " ++ integer_to_list(I) ++ "; exit " ++
                                     integer_to_list(I rem 3) ++ "'"}, [exit_status, {line, 80}]),
                  collect(P, [])
          end,
    Self = self(),
    Pids = [spawn(fun() -> Self ! {self(), Run(I)} end) || I <- lists:seq(1, 30)],
    Got = [receive {P, R} -> R end || P <- Pids],
    check("ports", Got, [{[integer_to_list(I)], I rem 3} || I <- lists:seq(1, 30)]).

collect(P, Acc) ->
    receive
        {P, {data, {eol, L}}} -> collect(P, [L | Acc]);
        {P, {exit_status, S}} -> {lists:reverse(Acc), S}
    after 20000 -> timeout
    end.

%% a TCP echo server and 100 clients on 127.0.0.1
tcp(Scale) ->
    {ok, L} = gen_tcp:listen(0, [binary, {active, false}, {reuseaddr, true}, {ip, {127, 0, 0, 1}}, {backlog, 256}]),
    {ok, Port} = inet:port(L),
    spawn(fun() -> acceptor(L) end),
    Self = self(),
    N = 20 * Scale,
    Pids = [spawn(fun() ->
                          {ok, S} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false}]),
                          Rs = [begin
                                    M = list_to_binary(io_lib:format("~p-~p;", [C, J])),
                                    ok = gen_tcp:send(S, M),
                                    {ok, R} = gen_tcp:recv(S, byte_size(M)),
                                    R =:= M
                                end || J <- lists:seq(1, N)],
                          gen_tcp:close(S),
                          Self ! {self(), lists:all(fun(X) -> X end, Rs)}
                  end) || C <- lists:seq(1, 100)],
    Got = [receive {P, R} -> R after 60000 -> timeout end || P <- Pids],
    gen_tcp:close(L),
    check("tcp echo", lists:usort(Got), [true]).

acceptor(L) ->
    case gen_tcp:accept(L) of
        {ok, S} -> spawn(fun() -> echo(S) end), acceptor(L);
        _ -> ok
    end.
echo(S) ->
    case gen_tcp:recv(S, 0) of
        {ok, B} -> gen_tcp:send(S, B), echo(S);
        _ -> gen_tcp:close(S)
    end.
