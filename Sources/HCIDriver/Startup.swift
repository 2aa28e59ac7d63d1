import HCI
import HCITransport
import Logging

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
            { [weak self] done in
                guard let self else { return done(.transportClosed(nil)) }
                guard info.supportedCommands.supports(.setEventMaskPage2) else { return done(nil) }
                step(SetEventMaskPage2(eventMaskPage2: configuration.eventMaskPage2), required: false) { _ in }(done)
            },
            step(LESetEventMask(leEventMask: configuration.leEventMask), required: false) { _ in },
            { [weak self] done in
                guard let self else { return done(.transportClosed(nil)) }
                readBufferSizes(useV2: info.supportedCommands.supports(.leReadBufferSizeV2)) { result in
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
            { [weak self] done in
                guard let self else { return done(.transportClosed(nil)) }
                guard info.supportedCommands.supports(.leReadMaximumDataLength) else { return done(nil) }
                step(LEReadMaximumDataLength(), required: false) { r in
                    info.maxDataLength = LEMaximumDataLength(
                        supportedMaxTXOctets: r.supportedMaxTXOctets, supportedMaxTXTime: r.supportedMaxTXTime,
                        supportedMaxRXOctets: r.supportedMaxRXOctets, supportedMaxRXTime: r.supportedMaxRXTime)
                }(done)
            },
        ]
        runSteps(steps[...]) { [weak self] error in
            // A driver released while starting answers nothing more: its owner went.
            guard let self else { return completion(.failure(error ?? .transportClosed(nil))) }
            if let error {
                logger.error("controller start failed: \(error)")
                // A half-initialised controller is of no use: close, so the failure is final.
                stop()
                completion(.failure(error))
                return
            }
            guard state == .starting else {
                completion(.failure(.transportClosed(nil)))
                return
            }
            controllerInfo = info
            aclCredits = info.totalACLDataPackets
            state = .running
            logger.info("controller ready: \(info.address), HCI version \(info.hciVersion), ACL \(info.aclDataPacketLength) bytes × \(info.totalACLDataPackets)")
            completion(.success(info))
        }
    }

    private func runSteps(_ steps: ArraySlice<StartupStep>, completion: @escaping (HCIError?) -> Void) {
        guard let first = steps.first else { return completion(nil) }
        first { [weak self] error in
            if let error { return completion(error) }
            guard let self else { return completion(.transportClosed(nil)) }
            runSteps(steps.dropFirst(), completion: completion)
        }
    }

    /// A step sending one command; `apply` takes its return parameters. A failed optional step
    /// is logged and skipped.
    private func step<C: HCICommand>(_ command: C, required: Bool,
                                     apply: @escaping (C.ReturnParameters) -> Void) -> StartupStep {
        { [weak self] done in
            guard let self else { return done(.transportClosed(nil)) }
            send(command) { [weak self] result in
                guard let self else { return done(.transportClosed(nil)) }
                switch result {
                case .success(let parameters):
                    apply(parameters)
                    done(nil)
                case .failure(let error) where required || isTransportClosed(error):
                    done(error)
                case .failure(let error):
                    logger.warning("start: \(error); going on without it")
                    done(nil)
                }
            }
        }
    }

    private func isTransportClosed(_ error: HCIError) -> Bool {
        if case .transportClosed = error { return true }
        return false
    }

    /// LE buffers ([v2] when the bitmap lists it, falling back to [v1] if it fails), or the
    /// shared BR/EDR buffers when LE has none of its own (Vol 4 Part E §7.8.2).
    private func readBufferSizes(useV2: Bool,
                                 completion: @escaping (Result<(Int, Int, Bool), HCIError>) -> Void) {
        let useLE: (Int, Int) -> Void = { [weak self] length, count in
            if length > 0 && count > 0 { return completion(.success((length, count, false))) }
            guard let self else { return completion(.failure(.transportClosed(nil))) }
            send(ReadBufferSize()) { result in
                completion(result.flatMap { r in
                    guard r.aclDataPacketLength > 0, r.totalNumACLDataPackets > 0 else {
                        return .failure(.notSupported("the controller reports no ACL buffers"))
                    }
                    return .success((Int(r.aclDataPacketLength), Int(r.totalNumACLDataPackets), true))
                })
            }
        }
        let readV1 = { [weak self] in
            guard let self else { return completion(.failure(.transportClosed(nil))) }
            self.send(LEReadBufferSizeV1()) { result in
                switch result {
                case .success(let r): useLE(Int(r.leACLDataPacketLength), Int(r.totalNumLEACLDataPackets))
                case .failure(let error): completion(.failure(error))
                }
            }
        }
        guard useV2 else { return readV1() }
        send(LEReadBufferSizeV2()) { [weak self] result in
            guard let self else { return completion(.failure(.transportClosed(nil))) }
            switch result {
            case .success(let r):
                useLE(Int(r.leACLDataPacketLength), Int(r.totalNumLEACLDataPackets))
            case .failure(.transportClosed(let error)):
                completion(.failure(.transportClosed(error)))
            case .failure(let error):
                logger.warning("start: \(error); trying LE Read Buffer Size [v1]")
                readV1()
            }
        }
    }
}
