import HCI
import HCITransport
import Logging
import Scheduling

extension HCIDriver {
    /// One step of the start sequence; calls `done` with nil to go on, or the error that ends
    /// the start.
    typealias StartupStep = (_ done: @escaping (HCIError?) -> Void) -> Void

    /// Opens the transport and initialises the controller:
    ///
    /// Reset → Read Local Version Information → Read Local Supported Commands → Read Local
    /// Supported Features → Read BD_ADDR → Set Event Mask → Set Event Mask Page 2 (if supported)
    /// → LE Set Event Mask → LE Read Buffer Size [v2] if supported, else [v1] (and Read Buffer
    /// Size when LE has no buffers of its own) → LE Read Local Supported Features → LE Read
    /// Maximum Data Length (if supported).
    ///
    /// Reset, the version and the buffer sizes are required; the other steps may fail or time
    /// out (controllers' supported-commands bitmaps are not always right) and are skipped. A
    /// failed start closes the transport.
    public func start(completion: @escaping (Result<ControllerInfo, HCIError>) -> Void) {
        guard state == .idle else {
            completion(.failure(.notSupported("the driver was already started")))
            return
        }
        do {
            try transport.open(on: loop, sink: self)
        } catch {
            state = .closed
            completion(.failure(.transportClosed(error as? HCITransportError ?? HCITransportError("\(error)"))))
            return
        }
        // The transport may have closed while opening.
        if state == .idle { state = .starting }
        guard state == .starting else {
            completion(.failure(.transportClosed(nil)))
            return
        }
        commandCredits = 1
        startCompletion = completion
        runInitialisation { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            // A driver released while starting answers nothing more: its owner went.
            guard let self else { return completion(result) }
            guard let completion = self.startCompletion else { return }
            self.startCompletion = nil
            if case .failure(let error) = result {
                self.logger.error("controller start failed: \(error)")
                // A half-initialised controller is of no use: close, so the failure is final.
                self.stop()
                completion(.failure(error))
                return
            }
            guard self.state == .starting, case .success(let info) = result else {
                completion(.failure(.transportClosed(nil)))
                return
            }
            self.controllerInfo = info
            self.aclCredits = info.totalACLDataPackets
            self.state = .running
            self.logger.info("controller ready: \(info.address), HCI version \(info.hciVersion), ACL \(info.aclDataPacketLength) bytes × \(info.totalACLDataPackets)")
            completion(.success(info))
        }
    }

    // MARK: Recovery

    /// The controller reset itself (Hardware Error, or a Reset nobody asked for), or failed
    /// while being initialised: every pending command fails, every connection's ACL state goes,
    /// the delegate hears `driverWillReset`, and the controller is reset and initialised
    /// again (`driverDidReset`). More than `maxRecoveries` within `recoveryWindow`, or an
    /// initialisation that fails, and the driver gives up: it closes (`driverDidClose`).
    func controllerDidReset(_ cause: String) {
        guard state == .starting || state == .running || state == .resetting else { return }
        let error = HCIError.controllerReset(cause)
        let now = loop.now
        let window = configuration.recoveryWindow.components
        let windowNanoseconds = window.seconds * 1_000_000_000 + window.attoseconds / 1_000_000_000
        recoveries.removeAll { now.nanoseconds - $0.nanoseconds >= windowNanoseconds }
        recoveries.append(now)
        let wasRunning = state == .running
        if state != .starting { state = .resetting }
        // The initialisation under way (if any) stops: its commands' answers are stale.
        initGeneration &+= 1
        let pending = outstandingCommands + drain(&commandQueue)
        outstandingCommands.removeAll()
        // After a reset the controller takes one command (Vol 4 Part E §4.4).
        commandCredits = 1
        connections.removeAll()
        sendOrder.removeAll()
        completionWatchdog?.cancel()
        completionWatchdog = nil
        aclCredits = 0
        reassembler.removeAll()
        for command in pending {
            command.timer?.cancel()
            command.completion(.failure(error))
        }
        guard state == .starting || state == .resetting else { return }
        if recoveries.count > configuration.maxRecoveries {
            let seconds = configuration.recoveryWindow.components.seconds
            return giveUp("the controller reset \(recoveries.count) times within \(seconds) s (last: \(cause)); given up")
        }
        logger.error("\(cause): resetting the controller and initialising it again")
        if wasRunning { delegate?.driverWillReset(error) }
        guard state == .resetting || state == .starting else { return }
        // A start under way starts over (its completion waits in `startCompletion`).
        guard state == .resetting else { return restartStart() }
        runInitialisation { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            guard let self, self.state == .resetting else { return }
            switch result {
            case .success(let info):
                self.controllerInfo = info
                self.aclCredits = info.totalACLDataPackets
                self.state = .running
                self.logger.info("controller ready again after its reset")
                self.delegate?.driverDidReset(info)
            case .failure(let error):
                self.giveUp("the controller could not be initialised again after its reset: \(error)")
            }
        }
    }

    /// A start the controller's reset interrupted runs the initialisation from the beginning.
    private func restartStart() {
        runInitialisation { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            guard let self, let completion = self.startCompletion else { return }
            self.startCompletion = nil
            guard case .success(let info) = result, self.state == .starting else {
                self.stop()
                return completion(result.flatMap { _ in .failure(.transportClosed(nil)) })
            }
            self.controllerInfo = info
            self.aclCredits = info.totalACLDataPackets
            self.state = .running
            completion(.success(info))
        }
    }

    /// The controller is of no use: the transport closes, with `reason` for the delegate.
    private func giveUp(_ reason: String) {
        logger.error("\(reason)")
        closeError = HCITransportError(reason)
        stop()
    }

    /// Reset → … → LE Read Maximum Data Length (see `start`); `finish` gets the outcome unless
    /// the controller reset meanwhile and another run replaced this one.
    func runInitialisation(then finish: @escaping (Result<ControllerInfo, HCIError>) -> Void) {
        initGeneration &+= 1
        let generation = initGeneration
        var info = ControllerInfo()
        let steps: [StartupStep] = [
            step(Reset(), required: true) { _ in },
            step(ReadLocalVersionInformation(), required: true) { r in
                info.hciVersion = r.hciVersion
                info.hciSubversion = r.hciSubversion
                info.lmpVersion = r.lmpVersion
                info.companyIdentifier = r.companyIdentifier
                info.lmpSubversion = r.lmpSubversion
            },
            step(ReadLocalSupportedCommands(), required: false) { r in
                info.supportedCommands = SupportedCommands(r.supportedCommands)
            },
            step(ReadLocalSupportedFeatures(), required: false) { r in info.lmpFeatures = r.lmpFeatures },
            step(ReadBDADDR(), required: false) { r in info.address = r.bdAddr },
            step(SetEventMask(eventMask: configuration.eventMask), required: false) { _ in },
            { [weakSelf = WeakHandle(self)] done in
                let `self` = weakSelf.object
                guard let self else { return done(.transportClosed(nil)) }
                guard info.supportedCommands.supports(.setEventMaskPage2) else { return done(nil) }
                self.step(SetEventMaskPage2(eventMaskPage2: self.configuration.eventMaskPage2), required: false) { _ in }(done)
            },
            step(LESetEventMask(leEventMask: configuration.leEventMask), required: false) { _ in },
            { [weakSelf = WeakHandle(self)] done in
                let `self` = weakSelf.object
                guard let self else { return done(.transportClosed(nil)) }
                self.readBufferSizes(useV2: info.supportedCommands.supports(.leReadBufferSizeV2)) { result in
                    switch result {
                    case .success(let sizes):
                        (info.aclDataPacketLength, info.totalACLDataPackets, info.usesSharedBREDRBuffers) = sizes
                        done(nil)
                    case .failure(let error):
                        done(error)
                    }
                }
            },
            step(LEReadLocalSupportedFeatures(), required: false) { r in info.leFeatures = r.features },
            { [weakSelf = WeakHandle(self)] done in
                let `self` = weakSelf.object
                guard let self else { return done(.transportClosed(nil)) }
                guard info.supportedCommands.supports(.leReadMaximumDataLength) else { return done(nil) }
                self.step(LEReadMaximumDataLength(), required: false) { r in
                    info.maxDataLength = LEMaximumDataLength(
                        supportedMaxTXOctets: r.supportedMaxTXOctets, supportedMaxTXTime: r.supportedMaxTXTime,
                        supportedMaxRXOctets: r.supportedMaxRXOctets, supportedMaxRXTime: r.supportedMaxRXTime)
                }(done)
            },
        ]
        runSteps(steps[...], generation: generation) { [weakSelf = WeakHandle(self)] error in
            let `self` = weakSelf.object
            // A driver released while starting answers nothing more: its owner went.
            guard let self else { return finish(.failure(error ?? .transportClosed(nil))) }
            // Replaced by another run: nothing to say.
            guard generation == self.initGeneration else { return }
            if let error { return finish(.failure(error)) }
            finish(.success(info))
        }
    }

    private func runSteps(_ steps: ArraySlice<StartupStep>, generation: UInt64, completion: @escaping (HCIError?) -> Void) {
        guard let first = steps.first else { return completion(nil) }
        // A run the controller's reset replaced sends nothing more.
        guard generation == initGeneration else { return completion(.controllerReset("replaced")) }
        first { [weakSelf = WeakHandle(self)] error in
            let `self` = weakSelf.object
            if let error { return completion(error) }
            guard let self else { return completion(.transportClosed(nil)) }
            self.runSteps(steps.dropFirst(), generation: generation, completion: completion)
        }
    }

    /// A step sending one command; `apply` takes its return parameters. A failed optional step
    /// is logged and skipped.
    private func step<C: HCICommand>(_ command: C, required: Bool,
                                     apply: @escaping (C.ReturnParameters) -> Void) -> StartupStep {
        { [weakSelf = WeakHandle(self)] done in
            let `self` = weakSelf.object
            guard let self else { return done(.transportClosed(nil)) }
            self.sendInitialising(command) { [weakSelf = WeakHandle(self)] result in
                let `self` = weakSelf.object
                guard let self else { return done(.transportClosed(nil)) }
                switch result {
                case .success(let parameters):
                    apply(parameters)
                    done(nil)
                case .failure(let error) where required || self.isFinal(error):
                    done(error)
                case .failure(let error):
                    self.logger.warning("start: \(error); going on without it")
                    done(nil)
                }
            }
        }
    }

    /// Whether `error` ends the initialisation, even from an optional step: the transport
    /// closed, or the controller reset meanwhile.
    private func isFinal(_ error: HCIError) -> Bool {
        switch error {
        case .transportClosed, .controllerReset: true
        default: false
        }
    }

    /// `send`, for the initialisation's own commands: they go out while the controller is
    /// being reset, when others are refused.
    private func sendInitialising<C: HCICommand>(_ command: C, completion: @escaping (Result<C.ReturnParameters, HCIError>) -> Void) {
        enqueue(command.packet, name: C.name, expected: C.completion, timeout: nil, initialising: true) { result in
            completion(result.flatMap { Self.decode(C.self, from: $0) })
        }
    }

    /// LE buffers ([v2] when the bitmap lists it, falling back to [v1] if it fails), or the
    /// shared BR/EDR buffers when LE has none of its own (Vol 4 Part E §7.8.2).
    private func readBufferSizes(useV2: Bool,
                                 completion: @escaping (Result<(Int, Int, Bool), HCIError>) -> Void) {
        let useLE: (Int, Int) -> Void = { [weakSelf = WeakHandle(self)] length, count in
            let `self` = weakSelf.object
            if length > 0 && count > 0 { return completion(.success((length, count, false))) }
            guard let self else { return completion(.failure(.transportClosed(nil))) }
            self.sendInitialising(ReadBufferSize()) { result in
                completion(result.flatMap { r in
                    guard r.aclDataPacketLength > 0, r.totalNumACLDataPackets > 0 else {
                        return .failure(.notSupported("the controller reports no ACL buffers"))
                    }
                    return .success((Int(r.aclDataPacketLength), Int(r.totalNumACLDataPackets), true))
                })
            }
        }
        let readV1 = { [weakSelf = WeakHandle(self)] in
            let `self` = weakSelf.object
            guard let self else { return completion(.failure(.transportClosed(nil))) }
            self.sendInitialising(LEReadBufferSizeV1()) { result in
                switch result {
                case .success(let r): useLE(Int(r.leACLDataPacketLength), Int(r.totalNumLEACLDataPackets))
                case .failure(let error): completion(.failure(error))
                }
            }
        }
        guard useV2 else { return readV1() }
        sendInitialising(LEReadBufferSizeV2()) { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            guard let self else { return completion(.failure(.transportClosed(nil))) }
            switch result {
            case .success(let r):
                useLE(Int(r.leACLDataPacketLength), Int(r.totalNumLEACLDataPackets))
            case .failure(let error) where self.isFinal(error):
                completion(.failure(error))
            case .failure(let error):
                self.logger.warning("start: \(error); trying LE Read Buffer Size [v1]")
                readV1()
            }
        }
    }
}
