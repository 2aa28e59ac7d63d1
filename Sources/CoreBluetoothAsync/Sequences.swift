import CoreBluetooth
import Foundation

/// **Linux extension.** One advertisement a scan heard: what
/// `centralManager(_:didDiscover:advertisementData:rssi:)` reports, as one value.
public struct CBDiscovery: Sendable {
    /// The advertising peripheral (the same object on every discovery of it).
    public let peripheral: CBPeripheral
    private let advertisement: Advertisement
    /// The signal strength in dBm (127: the controller could not measure it).
    public let rssi: Int

    /// The advertisement, keyed by `CBAdvertisementData…Key` as in Apple's delegate call.
    public var advertisementData: [String: Any] { advertisement.dictionary }

    init(peripheral: CBPeripheral, advertisementData: [String: Any], rssi: Int) {
        self.peripheral = peripheral
        advertisement = Advertisement(dictionary: advertisementData)
        self.rssi = rssi
    }

    /// Apple's dictionary holds `Any`; it is built once from values (strings, numbers, data,
    /// UUIDs) and never changed, so sharing it across threads is safe.
    private final class Advertisement: @unchecked Sendable {
        let dictionary: [String: Any]
        init(dictionary: [String: Any]) { self.dictionary = dictionary }
    }
}

/// **Linux extension.** An asynchronous sequence of a manager's or peripheral's events that
/// starts its work (a scan, a subscription) when iteration starts and stops it when the
/// iterating task ends or is cancelled.
public struct CBEventSequence<Element: Sendable>: AsyncSequence, Sendable {
    public typealias Failure = Never

    private let start: @Sendable () -> AsyncStream<Element>

    init(_ start: @escaping @Sendable (AsyncStream<Element>.Continuation) -> Void) {
        self.start = {
            let (stream, continuation) = AsyncStream.makeStream(of: Element.self, bufferingPolicy: .unbounded)
            start(continuation)
            return stream
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: start().makeAsyncIterator()) }

    /// Iterates the events.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<Element>.AsyncIterator

        public mutating func next() async -> Element? { await base.next() }

        public mutating func next(isolation actor: isolated (any Actor)?) async -> Element? {
            await base.next(isolation: actor)
        }
    }
}

/// **Linux extension.** ``CBEventSequence`` for events that can end with an error: a
/// peripheral's values, which end with its disconnection's error.
public struct CBThrowingEventSequence<Element: Sendable>: AsyncSequence, Sendable {
    public typealias Failure = any Error

    private let start: @Sendable () -> AsyncThrowingStream<Element, any Error>

    init(_ start: @escaping @Sendable (AsyncThrowingStream<Element, any Error>.Continuation) -> Void) {
        self.start = {
            let (stream, continuation) = AsyncThrowingStream.makeStream(of: Element.self, throwing: (any Error).self,
                                                                        bufferingPolicy: .unbounded)
            start(continuation)
            return stream
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: start().makeAsyncIterator()) }

    /// Iterates the events.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<Element, any Error>.AsyncIterator

        public mutating func next() async throws -> Element? { try await base.next() }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(any Error) -> Element? {
            try await base.next(isolation: actor)
        }
    }
}
