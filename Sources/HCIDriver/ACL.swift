import HCI
import Logging
import Scheduling

// MARK: Outbound

extension HCIDriver {
    /// Queues a whole L2CAP PDU (basic header included) for a connection. It is cut into
    /// fragments of the controller's ACL data length and sent as controller buffers free up,
    /// round-robin between connections.
    ///
    /// Returns false (and sends nothing) for an unknown handle, before `start` has read the
    /// buffer sizes, for a PDU whose length field disagrees with its size, or when the
    /// connection already has `maxQueuedPDUsPerConnection` PDUs waiting.
    @discardableResult
    public func sendACL(handle: ConnectionHandle, pdu: consuming [UInt8]) -> Bool {
        guard state == .running, let fragmentSize = controllerInfo?.aclDataPacketLength, fragmentSize > 0 else {
            logger.warning("ACL for 0x\(String(handle, radix: 16)) before the driver runs; rejected")
            return false
        }
        guard let connection = connections[handle] else {
            logger.warning("ACL for unknown connection 0x\(String(handle, radix: 16)); rejected")
            return false
        }
        guard pdu.count >= 4, 4 + (Int(pdu[0]) | Int(pdu[1]) << 8) == pdu.count else {
            logger.warning("ACL PDU of \(pdu.count) bytes is not one L2CAP PDU; rejected")
            return false
        }
        guard connection.queuedPDUs < configuration.maxQueuedPDUsPerConnection else {
            logger.info("ACL queue of 0x\(String(handle, radix: 16)) is full; rejected")
            return false
        }
        // A PDU of one fragment with a buffer free and nothing queued goes at once, as the pump
        // would send it, without the queue (whose storage the link would keep) or the send order
        // walk. Free buffers with packets waiting cannot be: the pump runs until one runs out.
        if pdu.count <= fragmentSize, aclCredits > 0, sendOrder.isEmpty, connection.fragments.isEmpty {
            takeBuffer(for: connection)
            transport.send(.acl(ACLDataPacket(handle: handle, boundary: .firstNonFlushable, data: consume pdu)))
            return true
        }
        if pdu.count <= fragmentSize {
            // A PDU that fits one fragment goes as it is, moved (not copied).
            let packet = ACLDataPacket(handle: handle, boundary: .firstNonFlushable, data: consume pdu)
            connection.fragments.append((packet: packet, endsPDU: true))
        } else {
            var offset = 0
            while offset < pdu.count {
                let end = min(offset + fragmentSize, pdu.count)
                let packet = ACLDataPacket(handle: handle, boundary: offset == 0 ? .firstNonFlushable : .continuing,
                                           data: Array(pdu[offset..<end]))
                connection.fragments.append((packet: packet, endsPDU: end == pdu.count))
                offset = end
            }
        }
        connection.queuedPDUs += 1
        if !sendOrder.contains(handle) { sendOrder.append(handle) }
        pumpACL()
        if !connection.fragments.isEmpty, connections[handle] === connection {
            connection.waitedForCredits = true
        }
        return true
    }

    /// Whole PDUs of a connection not yet completely handed to the controller (0 for unknown
    /// handles). The layer above compares it with its own limit for back-pressure.
    public func queuedPDUs(handle: ConnectionHandle) -> Int {
        connections[handle]?.queuedPDUs ?? 0
    }

    /// Whether an LE connection with this handle is open.
    public func isConnected(handle: ConnectionHandle) -> Bool {
        connections[handle] != nil
    }

    /// Sends fragments while the controller has buffers, one per connection in turn.
    func pumpACL() {
        var drained: [ConnectionHandle] = []
        while aclCredits > 0, !sendOrder.isEmpty {
            let handle = sendOrder.removeFirst()
            guard let connection = connections[handle], let next = connection.fragments.popFirst() else { continue }
            takeBuffer(for: connection)
            if next.endsPDU { connection.queuedPDUs -= 1 }
            if connection.fragments.isEmpty {
                if connection.waitedForCredits {
                    connection.waitedForCredits = false
                    drained.append(handle)
                }
            } else {
                sendOrder.append(handle)
            }
            // State is consistent before the send: a transport may answer synchronously.
            transport.send(.acl(next.packet))
        }
        if packetsWaitForBuffers, completionWatchdog == nil, let timeout = configuration.aclCompletionTimeout {
            completionWatchdog = loop.schedule(after: timeout) { [weakSelf = WeakHandle(self)] in weakSelf.object?.checkCompletions() }
        }
        for handle in drained where connections[handle]?.fragments.isEmpty == true {
            delegate?.driverCanSendMore(handle: handle)
        }
    }

    /// One controller buffer goes to a packet of `connection`: the completion watchdog's clock
    /// starts with the first packet in flight.
    private func takeBuffer(for connection: OutboundConnection) {
        aclCredits -= 1
        if connection.inFlight == 0 { connection.waitingSince = loop.now }
        connection.inFlight += 1
    }

    /// Packets are queued and the controller has no buffer free: what the completion watchdog
    /// watches over.
    var packetsWaitForBuffers: Bool { aclCredits == 0 && !sendOrder.isEmpty }

    /// Packets wait for buffers: a connection whose packets in flight have seen no completion
    /// for `aclCompletionTimeout` holds buffers the controller will never return (it forgot
    /// the link); the driver disconnects it, and the controller's answer ends the link.
    func checkCompletions() {
        completionWatchdog = nil
        guard state == .running, let timeout = configuration.aclCompletionTimeout else { return }
        let now = loop.now
        var next: LoopInstant?
        for (handle, connection) in connections where connection.inFlight > 0 && !connection.stalled {
            let deadline = connection.waitingSince + timeout
            guard deadline <= now else {
                next = min(next ?? deadline, deadline)
                continue
            }
            connection.stalled = true
            logger.warning("no packet completed on 0x\(String(handle, radix: 16)) for \(timeout) with \(connection.inFlight) in flight; disconnecting it")
            send(Disconnect(connectionHandle: handle, reason: .remoteUserTerminatedConnection)) { [weakSelf = WeakHandle(self)] result in
                let `self` = weakSelf.object
                if case .failure(let error) = result, error != .status(.unknownConnectionIdentifier, command: Disconnect.name) {
                    self?.logger.warning("Disconnect of stalled connection 0x\(String(handle, radix: 16)) failed: \(error)")
                }
            }
        }
        if packetsWaitForBuffers {
            completionWatchdog = loop.schedule(at: next ?? now + timeout) { [weakSelf = WeakHandle(self)] in weakSelf.object?.checkCompletions() }
        }
    }

    func handleNumberOfCompletedPackets(_ event: NumberOfCompletedPackets) {
        let total = controllerInfo?.totalACLDataPackets ?? 0
        let now = loop.now
        for entry in event.entries {
            guard let connection = connections[entry.handle] else {
                logger.debug("Number Of Completed Packets for unknown handle 0x\(String(entry.handle, radix: 16))")
                continue
            }
            // Never believe more completions than packets we sent on the connection.
            let returned = min(Int(entry.completedPackets), connection.inFlight)
            if returned < Int(entry.completedPackets) {
                logger.warning("controller completed \(entry.completedPackets) packets on 0x\(String(entry.handle, radix: 16)) but only \(connection.inFlight) were in flight")
            }
            connection.inFlight -= returned
            if returned > 0 { connection.waitingSince = now }
            aclCredits = min(aclCredits + returned, total)
        }
        pumpACL()
    }

    func connectionOpened(_ handle: ConnectionHandle) {
        guard connections[handle] == nil else { return }
        connections[handle] = OutboundConnection(serial: nextConnectionSerial)
        nextConnectionSerial &+= 1
    }

    /// The controller flushed whatever the connection had in its buffers (Vol 4 Part E §4.3):
    /// those buffers are free again, and what waited here is dropped.
    func connectionClosed(_ handle: ConnectionHandle) {
        if let connection = connections.removeValue(forKey: handle) {
            aclCredits = min(aclCredits + connection.inFlight, controllerInfo?.totalACLDataPackets ?? 0)
            sendOrder.removeAll { $0 == handle }
        }
        reassembler.reset(handle: handle)
    }
}

// MARK: Inbound

extension HCIDriver {
    func handleInboundACL(_ packet: consuming ACLDataPacket) {
        // Data is accepted for handles not (yet) registered: events and data travel separate
        // paths on some transports, so data can overtake its Connection Complete.
        // The common case, a whole PDU in one packet with nothing being reassembled, skips the
        // reassembler's bookkeeping.
        if packet.boundary != .continuing, !reassembler.hasPartials, packet.data.count >= 4,
           4 + (Int(packet.data[0]) | Int(packet.data[1]) << 8) == packet.data.count {
            // Handed over whole, with no other reference left, so that L2CAP takes its header
            // off in place.
            let handle = packet.handle, pdu = packet.data
            _ = consume packet
            delegate?.didReceiveACL(handle: handle, pdu: pdu)
            return
        }
        for outcome in reassembler.receive(packet) {
            switch outcome {
            case .pdu(let pdu): delegate?.didReceiveACL(handle: packet.handle, pdu: pdu)
            case .dropped(let reason): logger.warning("ACL 0x\(String(packet.handle, radix: 16)): \(reason)")
            }
        }
    }
}

/// Reassembles inbound ACL fragments into L2CAP PDUs, per connection handle.
///
/// A first fragment (Packet_Boundary 0b10 or 0b00; 0b11 is treated alike) starts a PDU whose
/// size is 4 + the L2CAP length field; continuations (0b01) append. A first fragment may be
/// larger than the controller's buffer size (some controllers send whole PDUs). Bad sequences
/// drop the partial PDU and never trap. A partial PDU never exceeds 65535 + 4 bytes, since the
/// length field is 16 bits and overflowing fragments are dropped.
struct ACLReassembler {
    enum Outcome: Equatable {
        case pdu([UInt8])
        case dropped(String)
    }

    private struct Partial {
        var bytes: [UInt8]
        /// 4 + the L2CAP length, once the basic header has arrived.
        var expected: Int?
    }

    private var partials: [ConnectionHandle: Partial] = [:]

    /// Whether a PDU is being reassembled on any handle.
    var hasPartials: Bool { !partials.isEmpty }

    /// Whether a PDU is being reassembled on this handle.
    func inProgress(handle: ConnectionHandle) -> Bool { partials[handle] != nil }

    mutating func receive(_ packet: ACLDataPacket) -> [Outcome] {
        var outcomes: [Outcome] = []
        var partial: Partial
        switch packet.boundary {
        case .continuing:
            guard let existing = partials.removeValue(forKey: packet.handle) else {
                return [.dropped("continuation of \(packet.data.count) bytes without a start; dropped")]
            }
            partial = existing
            partial.bytes.append(contentsOf: packet.data)
        case .firstFlushable, .firstNonFlushable, .complete:
            if let stale = partials.removeValue(forKey: packet.handle) {
                outcomes.append(.dropped("new PDU started while \(stale.bytes.count) bytes of "
                    + "\(stale.expected.map(String.init) ?? "?") were reassembled; partial PDU dropped"))
            }
            partial = Partial(bytes: packet.data, expected: nil)
        }
        if partial.expected == nil, partial.bytes.count >= 4 {
            partial.expected = 4 + (Int(partial.bytes[0]) | Int(partial.bytes[1]) << 8)
        }
        guard let expected = partial.expected, partial.bytes.count >= expected else {
            partials[packet.handle] = partial
            return outcomes
        }
        if partial.bytes.count == expected {
            outcomes.append(.pdu(partial.bytes))
        } else {
            outcomes.append(.dropped("\(partial.bytes.count) bytes for a \(expected)-byte PDU; dropped"))
        }
        return outcomes
    }

    mutating func reset(handle: ConnectionHandle) {
        partials[handle] = nil
    }

    mutating func removeAll() {
        partials.removeAll()
    }
}
