--  tasks.adb -- GNAT's tasking run time over pthreads, for preload_tests/real/ada.sh.
--
--  Rendezvous, protected objects with entry barriers, hundreds of short tasks,
--  timed entry calls and selective accepts with delay alternatives, periodic
--  "delay until", abort of a task that sleeps in a loop, an exception raised in an
--  accept body, and tasks pinned to a CPU (the CPU aspect: their threads get a CPU
--  mask, so bobbin gives each an OS thread of its own) that sleep while another
--  pinned task ends. Every result is checked here; the last line is "ok".
--  stdout has no times; stderr gets "time SECONDS" (the whole run) and
--  "ping_time SECONDS" (the rendezvous part).
--
--  Usage: tasks PINGS TASKS PINNED_ROUNDS
with Ada.Command_Line;         use Ada.Command_Line;
with Ada.Real_Time;            use Ada.Real_Time;
with Ada.Text_IO;              use Ada.Text_IO;
with System.Multiprocessors;   use System.Multiprocessors;

procedure Tasks is
   N_Ping   : constant Integer := Integer'Value (Argument (1));
   N_Tasks  : constant Integer := Integer'Value (Argument (2));
   N_Pinned : constant Integer := Integer'Value (Argument (3));
   Failed   : Boolean := False;
   T_Start  : constant Time := Clock;

   procedure Check (Cond : Boolean; What : String) is
   begin
      if not Cond then
         Put_Line ("FAIL " & What);
         Failed := True;
      end if;
   end Check;

   function Seconds_Since (T : Time) return Duration is
   begin
      return To_Duration (Clock - T);
   end Seconds_Since;
begin
   --  1. rendezvous: a server task, called N_Ping times
   declare
      task Server is
         entry Ping (X : in out Integer);
      end Server;
      task body Server is
      begin
         loop
            select
               accept Ping (X : in out Integer) do
                  X := X + 1;
               end Ping;
            or
               terminate;
            end select;
         end loop;
      end Server;
      X  : Integer := 0;
      T0 : constant Time := Clock;
   begin
      for I in 1 .. N_Ping loop
         Server.Ping (X);
      end loop;
      Put_Line (Standard_Error, "ping_time" & Duration'Image (Seconds_Since (T0)));
      Check (X = N_Ping, "ping count");
      Put_Line ("ping" & Integer'Image (X));
   end;

   --  2. N_Tasks short tasks bump a protected counter; an entry barrier waits for all
   declare
      protected Counter is
         procedure Inc (By : Integer);
         entry Wait_For_All;
         function Value return Long_Integer;
      private
         Count : Integer := 0;
         Sum   : Long_Integer := 0;
      end Counter;
      protected body Counter is
         procedure Inc (By : Integer) is
         begin
            Count := Count + 1;
            Sum := Sum + Long_Integer (By);
         end Inc;
         entry Wait_For_All when Count >= N_Tasks is
         begin
            null;
         end Wait_For_All;
         function Value return Long_Integer is
         begin
            return Sum;
         end Value;
      end Counter;
      task type Incr is
         entry Start (By : Integer);
      end Incr;
      task body Incr is
         Mine : Integer;
      begin
         accept Start (By : Integer) do
            Mine := By;
         end Start;
         Counter.Inc (Mine);
      end Incr;
      Incs : array (1 .. N_Tasks) of Incr;
      Want : constant Long_Integer := Long_Integer (N_Tasks) * Long_Integer (N_Tasks + 1) / 2;
   begin
      for I in Incs'Range loop
         Incs (I).Start (I);
      end loop;
      Counter.Wait_For_All;
      Check (Counter.Value = Want, "counter sum");
      Put_Line ("tasks" & Integer'Image (N_Tasks) & " sum" & Long_Integer'Image (Counter.Value));
   end;

   --  3. a bounded buffer (protected entries) between 3 producers and this task
   declare
      type Slots is array (0 .. 9) of Integer;
      protected Buffer is
         entry Put (X : Integer);
         entry Take (X : out Integer);
      private
         A : Slots;
         Head, Tail, Count : Integer := 0;
      end Buffer;
      protected body Buffer is
         entry Put (X : Integer) when Count < 10 is
         begin
            A (Tail) := X;
            Tail := (Tail + 1) mod 10;
            Count := Count + 1;
         end Put;
         entry Take (X : out Integer) when Count > 0 is
         begin
            X := A (Head);
            Head := (Head + 1) mod 10;
            Count := Count - 1;
         end Take;
      end Buffer;
      task type Producer (Base : Integer);
      task body Producer is
      begin
         for I in 1 .. 2000 loop
            Buffer.Put (Base + I);
         end loop;
      end Producer;
      P1 : Producer (0);
      P2 : Producer (100_000);
      P3 : Producer (200_000);
      V   : Integer;
      Sum : Long_Integer := 0;
   begin
      for I in 1 .. 6000 loop
         Buffer.Take (V);
         Sum := Sum + Long_Integer (V);
      end loop;
      Check (Sum = 3 * 2001000 + 2000 * 300_000, "buffer sum");
      Put_Line ("buffer sum" & Long_Integer'Image (Sum));
   end;

   --  4. timed entry calls to an entry that is never accepted, and a selective
   --  accept whose delay alternative is taken, then one whose accept is
   declare
      pragma Warnings (Off, "no accept for entry");
      task Busy is
         entry Never;
         entry Release;
      end Busy;
      task body Busy is
      begin
         accept Release;
      end Busy;
      task Waiter is
         entry Poke;
         entry Result (Timeouts : out Integer);
      end Waiter;
      task body Waiter is
         Timeouts : Integer := 0;
      begin
         for I in 1 .. 2 loop
            select
               accept Poke;
            or
               delay 0.03;
               Timeouts := Timeouts + 1;
            end select;
         end loop;
         select
            accept Poke;
         or
            delay 10.0;
            Timeouts := Timeouts + 100;
         end select;
         accept Result (Timeouts : out Integer) do
            Timeouts := Waiter.Timeouts;
         end Result;
      end Waiter;
      Timed_Out : Integer := 0;
      W_Timeouts : Integer;
      T0 : constant Time := Clock;
   begin
      for I in 1 .. 5 loop
         select
            Busy.Never;
         or
            delay 0.02;
            Timed_Out := Timed_Out + 1;
         end select;
      end loop;
      Check (Seconds_Since (T0) >= 0.1, "timed calls waited their delays");
      Busy.Release;
      delay 0.1;
      Waiter.Poke;
      Waiter.Result (W_Timeouts);
      Check (Timed_Out = 5 and W_Timeouts = 2, "timed calls and selective accepts");
      Put_Line ("timed out" & Integer'Image (Timed_Out) & " accept timeouts" &
                Integer'Image (W_Timeouts));
   end;

   --  5. periodic delay until: 20 periods of 10 ms
   declare
      Next : Time := Clock;
      T0   : constant Time := Next;
   begin
      for I in 1 .. 20 loop
         Next := Next + Milliseconds (10);
         delay until Next;
      end loop;
      Check (Clock >= T0 + Milliseconds (200), "delay until");
      Put_Line ("periods 20");
   end;

   --  6. abort of a task that sleeps in a loop; an exception raised in an accept body
   declare
      task Looper;
      task body Looper is
         X : Long_Integer := 0;
      begin
         loop
            X := X + 1;
            delay 0.001;
         end loop;
      end Looper;
      task Raiser is
         entry Go;
      end Raiser;
      task body Raiser is
      begin
         accept Go do
            raise Constraint_Error;
         end Go;
      exception
         when Constraint_Error => null;
      end Raiser;
      Caught : Boolean := False;
   begin
      delay 0.05;
      abort Looper;
      for I in 1 .. 1000 loop
         exit when Looper'Terminated;
         delay 0.01;
      end loop;
      Check (Looper'Terminated, "aborted task terminated");
      begin
         Raiser.Go;
      exception
         when Constraint_Error => Caught := True;
      end;
      Check (Caught, "exception from the rendezvous");
      Put_Line ("aborted " & Boolean'Image (Looper'Terminated) & " caught " & Boolean'Image (Caught));
   end;

   --  7. pinned tasks: one sleeps, another sleeps in a loop and ends first
   for Round in 1 .. N_Pinned loop
      declare
         Last : constant CPU := Number_Of_CPUs;
         task type Pinned (Where : CPU; Long : Boolean) with CPU => Where;
         task body Pinned is
         begin
            if Long then
               delay 0.2;
            else
               for I in 1 .. 100 loop
                  delay 0.001;
               end loop;
            end if;
         end Pinned;
         Sleeper : Pinned (1, True);
         Looper  : Pinned (Last, False);
      begin
         null;
      end;
   end loop;
   Put_Line ("pinned rounds" & Integer'Image (N_Pinned));

   Put_Line (Standard_Error, "time" & Duration'Image (Seconds_Since (T_Start)));
   if not Failed then
      Put_Line ("ok");
   end if;
end Tasks;
