/// A key that is an integer at heart: `IntegerKeyMap` hashes its bits with one multiply.
public protocol IntegerMapKey: Equatable {
    var integerMapBits: UInt64 { get }
}

extension UInt8: IntegerMapKey { @inlinable public var integerMapBits: UInt64 { UInt64(self) } }
extension UInt16: IntegerMapKey { @inlinable public var integerMapBits: UInt64 { UInt64(self) } }
extension UInt32: IntegerMapKey { @inlinable public var integerMapBits: UInt64 { UInt64(self) } }
extension UInt64: IntegerMapKey { @inlinable public var integerMapBits: UInt64 { self } }
extension Int: IntegerMapKey { @inlinable public var integerMapBits: UInt64 { UInt64(bitPattern: Int64(self)) } }
extension ObjectIdentifier: IntegerMapKey {
    @inlinable public var integerMapBits: UInt64 { UInt64(UInt(bitPattern: self)) }
}

/// A hash map for integer keys (connection handles, access addresses, ATT handles) on the
/// per-packet paths. `Dictionary` hashes every key with SipHash: 17 lookups per notification
/// made 5% of the stack's instructions. Open addressing with linear probing and backward-shift
/// deletion (no tombstones), load at most one half, Fibonacci hashing.
/// One array of keys and one of values (an array of optional tuples would need a generic
/// layout per element).
/// A map that never held two entries keeps its one entry inline, without slot storage: most
/// maps by connection (a device's links, a controller's access addresses, a GATT server's
/// client states) hold one in fleets of thousands of devices, where two arrays each cost a
/// link ~110 bytes.
/// Iteration order is unspecified, as `Dictionary`'s.
public struct IntegerKeyMap<Key: IntegerMapKey, Value> {
    @usableFromInline var slotKeys: [Key?]
    @usableFromInline var slotValues: [Value?]
    /// The entry of a map without slots (nil once slots exist).
    @usableFromInline var single: (key: Key, value: Value)?
    @usableFromInline var shift: UInt64
    @usableFromInline var _count = 0

    @inlinable
    public var count: Int { _count }

    /// An empty map; its slots (4 at first, doubling) are made at the second insertion: every
    /// connection keeps maps that often stay empty or hold one entry (a device's links by
    /// handle, with one link), and fleets of thousands paid for 8 slots up front.
    @inlinable
    public init() {
        slotKeys = []
        slotValues = []
        single = nil
        shift = 64 - 2
    }

    @inlinable
    public var isEmpty: Bool { count == 0 }

    @inlinable @inline(__always)
    func home(_ key: Key) -> Int {
        Int(truncatingIfNeeded: (key.integerMapBits &* 0x9E37_79B9_7F4A_7C15) >> shift)
    }

    /// The slot holding `key`, or the empty slot where it would go.
    @inlinable @inline(__always)
    func slot(of key: Key) -> (index: Int, found: Bool) {
        slotKeys.withUnsafeBufferPointer { keys in
            guard !keys.isEmpty else { return (0, false) }
            let mask = keys.count - 1
            var index = home(key)
            while true {
                guard let candidate = keys[index] else { return (index, false) }
                if candidate == key { return (index, true) }
                index = (index + 1) & mask
            }
        }
    }

    @inlinable
    public subscript(key: Key) -> Value? {
        @inline(__always)
        get {
            let (index, found) = slot(of: key)
            if found { return slotValues[index] }
            if let single, single.key == key { return single.value }
            return nil
        }
        set {
            if let newValue { updateValue(newValue, forKey: key) } else { removeValue(forKey: key) }
        }
    }

    @inlinable
    @discardableResult
    public mutating func updateValue(_ value: Value, forKey key: Key) -> Value? {
        var (index, found) = slot(of: key)
        if found {
            let old = slotValues[index]
            slotValues[index] = value
            return old
        }
        if slotKeys.isEmpty {
            if let old = single {
                if old.key == key {
                    single = (key, value)
                    return old.value
                }
            } else {
                single = (key, value)
                _count = 1
                return nil
            }
        }
        if (count + 1) * 2 > slotKeys.count {
            grow()
            index = slot(of: key).index
        }
        slotKeys[index] = key
        slotValues[index] = value
        _count += 1
        return nil
    }

    @inlinable
    @discardableResult
    public mutating func removeValue(forKey key: Key) -> Value? {
        let (removed, found) = slot(of: key)
        guard found else {
            guard let old = single, old.key == key else { return nil }
            single = nil
            _count = 0
            return old.value
        }
        let old = slotValues[removed]
        slotKeys[removed] = nil
        slotValues[removed] = nil
        _count -= 1
        // Backward shift: pull later members of the probe run into the hole, so lookups never
        // stop early at it.
        let mask = slotKeys.count - 1
        var hole = removed
        var index = (removed + 1) & mask
        while let key = slotKeys[index] {
            // Move the key unless its home lies cyclically in (hole, index]: that is, when it
            // sits at least as far from its home as from the hole.
            let fromHome = (index - home(key)) & mask
            let fromHole = (index - hole) & mask
            if fromHome >= fromHole {
                slotKeys[hole] = key
                slotValues[hole] = slotValues[index]
                slotKeys[index] = nil
                slotValues[index] = nil
                hole = index
            }
            index = (index + 1) & mask
        }
        return old
    }

    @inlinable
    public mutating func removeAll(keepingCapacity: Bool = false) {
        guard keepingCapacity else {
            self = IntegerKeyMap()
            return
        }
        guard _count > 0 else { return }
        single = nil
        for i in slotKeys.indices where slotKeys[i] != nil {
            slotKeys[i] = nil
            slotValues[i] = nil
        }
        _count = 0
    }

    @usableFromInline
    mutating func grow() {
        let oldKeys = slotKeys, oldValues = slotValues
        // From none to 4 (the inline entry and the one being added, at most half full).
        let slots = oldKeys.isEmpty ? 4 : oldKeys.count * 2
        slotKeys = Array(repeating: nil, count: slots)
        slotValues = Array(repeating: nil, count: slots)
        shift = oldKeys.isEmpty ? 64 - 2 : shift - 1
        if let moved = single {
            single = nil
            let index = slot(of: moved.key).index
            slotKeys[index] = moved.key
            slotValues[index] = moved.value
        }
        for i in oldKeys.indices {
            guard let key = oldKeys[i], let value = oldValues[i] else { continue }
            let index = slot(of: key).index
            slotKeys[index] = key
            slotValues[index] = value
        }
    }

    /// The keys, in unspecified order.
    @inlinable
    public var keys: [Key] { single.map { [$0.key] } ?? slotKeys.compactMap { $0 } }

    /// The values, in unspecified order.
    @inlinable
    public var values: [Value] { single.map { [$0.value] } ?? slotValues.compactMap { $0 } }

    @inlinable
    public subscript(key: Key, default defaultValue: @autoclosure () -> Value) -> Value {
        get { self[key] ?? defaultValue() }
        set { updateValue(newValue, forKey: key) }
    }
}

extension IntegerKeyMap: Sequence {
    /// Holds the slot arrays and the inline entry, not the map: with the map held, every step
    /// of a walk copied and destroyed the whole map (callgrind: ~320 instructions a slot on
    /// `CBCentralManager`'s table of weak peripherals).
    public struct Iterator: IteratorProtocol {
        @usableFromInline let slotKeys: [Key?]
        @usableFromInline let slotValues: [Value?]
        @usableFromInline var single: (key: Key, value: Value)?
        @usableFromInline var index = 0
        @inlinable init(map: IntegerKeyMap) {
            slotKeys = map.slotKeys
            slotValues = map.slotValues
            single = map.single
        }
        @inlinable
        public mutating func next() -> (key: Key, value: Value)? {
            while index < slotKeys.count {
                defer { index += 1 }
                if let key = slotKeys[index], let value = slotValues[index] { return (key, value) }
            }
            // A map has slots or an inline entry, never both.
            guard let entry = single else { return nil }
            single = nil
            return entry
        }
    }

    @inlinable
    public func makeIterator() -> Iterator { Iterator(map: self) }
}

extension IntegerKeyMap: ExpressibleByDictionaryLiteral {
    @inlinable
    public init(dictionaryLiteral elements: (Key, Value)...) {
        self.init()
        for (key, value) in elements { updateValue(value, forKey: key) }
    }
}

extension IntegerKeyMap: Sendable where Key: Sendable, Value: Sendable {}
