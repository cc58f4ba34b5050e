;;; threads.lisp — SBCL's threads, collector and interrupts, each result
;;; checked against a value computed without threads. Prints one line per
;;; part, then "ok" (or "FAIL"). Argument: a scale (1 short, 3 full).
(defvar *scale* (parse-integer (or (second sb-ext:*posix-argv*) "1")))
(defvar *ok* t)
(defun check (what got want)
  (unless (equal got want)
    (setf *ok* nil)
    (format t "FAIL ~a: ~s, wanted ~s~%" what got want)))
(defun work (n)
  (let ((s 0))
    (dotimes (i 20000) (incf s (length (make-list (+ 5 (mod (+ i n) 7))))))
    s))
(defun rounds-of (k rounds)
  (let ((s 0)) (dotimes (j rounds) (incf s (work (+ k j)))) s))

;; 1. computing threads, each asking for a full collection (stop the world)
(let* ((rounds (* 10 *scale*))
       (ts (loop for k below 8
                 collect (let ((k k))
                           (sb-thread:make-thread
                            (lambda ()
                              (let ((s 0))
                                (dotimes (j rounds)
                                  (when (= j 5) (sb-ext:gc :full t))
                                  (incf s (work (+ k j))))
                                s))))))
       (got (mapcar #'sb-thread:join-thread ts)))
  (check "collecting threads" got (loop for k below 8 collect (rounds-of k rounds)))
  (format t "collecting threads: ~a~%" got))

;; 2. four producers and a consumer through a mutex and a waitqueue
(let* ((m (sb-thread:make-mutex)) (wq (sb-thread:make-waitqueue)) (q nil)
       (per (* 1000 *scale*)) (n (* 4 per))
       (prod (loop for p below 4
                   collect (let ((p p))
                             (sb-thread:make-thread
                              (lambda ()
                                (dotimes (i per)
                                  (sb-thread:with-mutex (m)
                                    (push (+ (* p per) i) q)
                                    (sb-thread:condition-notify wq))))))))
       (cons (sb-thread:make-thread
              (lambda ()
                (let ((got 0) (sum 0))
                  (loop while (< got n)
                        do (sb-thread:with-mutex (m)
                             (loop until q do (sb-thread:condition-wait wq m))
                             (incf sum (pop q))
                             (incf got)))
                  sum)))))
  (mapc #'sb-thread:join-thread prod)
  (let ((s (sb-thread:join-thread cons)))
    (check "queue" s (loop for i below n sum i))
    (format t "queue: ~a items, sum ~a~%" n s)))

;; 3. two semaphores, ping-pong
(let* ((a (sb-thread:make-semaphore)) (b (sb-thread:make-semaphore)) (n (* 2000 *scale*))
       (th (sb-thread:make-thread
            (lambda ()
              (dotimes (i n) (sb-thread:wait-on-semaphore a) (sb-thread:signal-semaphore b))
              n))))
  (dotimes (i n) (sb-thread:signal-semaphore a) (sb-thread:wait-on-semaphore b))
  (check "ping-pong" (sb-thread:join-thread th) n)
  (format t "ping-pong: ~a~%" n))

;; 4. a collection while a thread sleeps
(let ((th (sb-thread:make-thread (lambda () (sleep 0.2) 7))))
  (sb-ext:gc :full t)
  (check "sleeper" (sb-thread:join-thread th) 7)
  (format t "sleeper: 7~%"))

;; 5. short threads that allocate
(let* ((n (* 200 *scale*))
       (ts (loop for i below n
                 collect (let ((i i)) (sb-thread:make-thread (lambda () (length (make-list (* i 10))))))))
       (got (reduce #'+ (mapcar #'sb-thread:join-thread ts))))
  (check "short threads" got (loop for i below n sum (* i 10)))
  (format t "short threads: ~a~%" got))

;; 6. interrupt-thread (SBCL's own signal) of a thread that sleeps
(let* ((flag nil)
       (th (sb-thread:make-thread
            (lambda () (loop repeat 500 until flag do (sleep 0.01)) flag))))
  (sleep 0.05)
  (sb-thread:interrupt-thread th (lambda () (setf flag :interrupted)))
  (check "interrupt" (sb-thread:join-thread th) :interrupted)
  (format t "interrupt: ~a~%" flag))

(format t "~a~%" (if *ok* "ok" "FAIL"))
