import Foundation

/// A delegate method that Core Bluetooth will never call.
public struct LintFinding: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable {
        /// Nearly the requirement's name, labels or types, so not its witness.
        case nearMiss = "near-miss"
        /// The requirement's witness, but in a subclass of the conforming class, which doesn't
        /// implement it: calls go to the protocol's empty default.
        case subclassOnly = "subclass-only"
    }

    public var kind: Kind
    public var file: String
    public var line: Int
    public var column: Int
    /// The type the method is in.
    public var typeName: String
    /// The method's Swift name, as written: `centralManager(_:didDiscover:advertisementData:RSSI:)`.
    public var written: String
    /// The requirement it was meant to implement.
    public var requirement: DelegateRequirement
    /// Why it is not called.
    public var reason: String
    /// What to do, ending with the declaration to write.
    public var fix: String

    /// Compiler style, so editors and CI logs link to the line: the finding, then the fix
    /// indented.
    public var description: String {
        "\(file):\(line):\(column): warning: `\(written)` in `\(typeName)` is never called: \(reason)\n    \(fix)"
    }
}

/// Finds delegate methods that Core Bluetooth on Linux will never call.
///
/// Swift on Linux has no `@objc optional` requirements, so the optional methods of
/// `CBCentralManagerDelegate`, `CBPeripheralDelegate` and `CBPeripheralManagerDelegate` are
/// requirements with empty default implementations. A method that misses one by a label, a
/// type or a spelling is a different method, which compiles without a word (Apple's compiler
/// warns about the near miss). And a requirement's witness is chosen where the conformance is
/// declared: a method written only in a subclass of the conforming class overrides nothing,
/// and the protocol's empty default is called (Objective-C's runtime would find it).
public enum DelegateLinter {
    /// Lints the Swift files at `paths` (files, or directories searched recursively) as one
    /// module: a class may conform in one file and be subclassed in another. Returns the
    /// findings in file and line order, and how many files were read.
    public static func lint(paths: [String]) throws -> (findings: [LintFinding], files: Int) {
        let files = try swiftFiles(at: paths)
        var sources: [(path: String, source: String)] = []
        for file in files {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw LintError("cannot read \(file)")
            }
            sources.append((file, String(decoding: data, as: UTF8.self)))
        }
        return (lint(sources: sources), files.count)
    }

    /// Lints source texts, each named by its path for the findings.
    public static func lint(sources: [(path: String, source: String)]) -> [LintFinding] {
        var index = SourceIndex()
        for (path, source) in sources { index.add(source: source, file: path) }
        var findings: [LintFinding] = []
        for type in index.types.values {
            findings += check(type, in: index)
        }
        return findings.sorted { ($0.file, $0.line, $0.column) < ($1.file, $1.line, $1.column) }
    }

    /// The `.swift` files at `paths`, sorted; directories are searched recursively, skipping
    /// hidden ones and build folders.
    public static func swiftFiles(at paths: [String]) throws -> [String] {
        var result: [String] = []
        let manager = FileManager.default
        for path in paths {
            var isDirectory: ObjCBool = false
            guard manager.fileExists(atPath: path, isDirectory: &isDirectory) else {
                throw LintError("no such file or directory: \(path)")
            }
            guard isDirectory.boolValue else {
                result.append(path)
                continue
            }
            guard let walker = manager.enumerator(atPath: path) else { throw LintError("cannot read \(path)") }
            var found: [String] = []
            while let relative = walker.nextObject() as? String {
                let name = (relative as NSString).lastPathComponent
                if name.hasPrefix(".") || name == "build" {
                    walker.skipDescendants()
                    continue
                }
                if name.hasSuffix(".swift") { found.append((path as NSString).appendingPathComponent(relative)) }
            }
            result += found.sorted()
        }
        return result
    }

    // MARK: Checking one type

    private static func check(_ type: SourceIndex.TypeInfo, in index: SourceIndex) -> [LintFinding] {
        // The classes above it among the sources, nearest first.
        var ancestors: [SourceIndex.TypeInfo] = []
        var next = index.superclass(of: type)
        while let ancestor = next, !ancestors.contains(where: { $0.name == ancestor.name }), ancestor.name != type.name {
            ancestors.append(ancestor)
            next = index.superclass(of: ancestor)
        }
        let own = index.declaredDelegateProtocols(of: type)
        var inherited: Set<String> = []
        for ancestor in ancestors { inherited.formUnion(index.declaredDelegateProtocols(of: ancestor)) }
        let protocols = own.union(inherited)
        guard !protocols.isEmpty else { return [] }
        let requirements = DelegateRequirement.all.filter { protocols.contains($0.protocolName) }
        let candidates = type.methods.filter { !$0.parsed.isStatic && !$0.parsed.isGeneric }

        var findings: [LintFinding] = []
        for method in candidates {
            let parsed = method.parsed
            if let witnessed = requirements.first(where: { isWitness(parsed, of: $0) }) {
                // A witness, but of a requirement the class inherits a conformance to: only
                // called if a class above declares it too.
                guard !own.contains(witnessed.protocolName), !parsed.isOverride else { continue }
                let conformer = ancestors.last { index.declaredDelegateProtocols(of: $0).contains(witnessed.protocolName) }
                let implemented = ancestors.contains { ancestor in
                    ancestor.methods.contains { isWitness($0.parsed, of: witnessed) }
                }
                guard let conformer, !implemented else { continue }
                findings.append(LintFinding(
                    kind: .subclassOnly, file: parsed.location.file, line: parsed.location.line,
                    column: parsed.location.column, typeName: type.name, written: parsed.signature.name,
                    requirement: witnessed,
                    reason: "`\(conformer.name)`, which it inherits from, conforms to \(witnessed.protocolName) "
                        + "without implementing `\(witnessed.signature.name)`, so the protocol's empty default "
                        + "is called (a requirement's implementation is chosen where the conformance is declared)",
                    fix: "declare it in the body of `\(conformer.name)` (not in an extension, not `final`, `open` if "
                        + "subclasses are in another module; an empty body will do) and mark this one `override`: "
                        + "\(witnessed.declaration) {}"))
                continue
            }
            guard !parsed.returnsValue, let near = nearest(parsed, in: requirements) else { continue }
            // A near miss of a requirement the type implements anyway is taken as an overload
            // on purpose.
            guard !type.methods.contains(where: { isWitness($0.parsed, of: near.requirement) }) else { continue }
            findings.append(LintFinding(
                kind: .nearMiss, file: parsed.location.file, line: parsed.location.line,
                column: parsed.location.column, typeName: type.name, written: parsed.signature.name,
                requirement: near.requirement,
                reason: "it nearly matches \(near.requirement.protocolName)'s `\(near.requirement.signature.name)` ("
                    + near.reasons.joined(separator: "; ") + ")",
                fix: "write instead: \(near.requirement.declaration)"))
        }
        return findings
    }

    static func isWitness(_ method: ParsedMethod, of requirement: DelegateRequirement) -> Bool {
        method.signature == requirement.signature && method.effects == nil && !method.returnsValue
            && !method.isStatic && !method.isGeneric
    }

    // MARK: Nearness

    struct NearMatch {
        var requirement: DelegateRequirement
        var reasons: [String]
    }

    /// The requirement `method` nearly matches, with the fewest differences; nil if none is
    /// near.
    static func nearest(_ method: ParsedMethod, in requirements: [DelegateRequirement]) -> NearMatch? {
        var best: NearMatch?
        for requirement in requirements {
            guard let reasons = differences(method, requirement), !reasons.isEmpty else { continue }
            if best == nil || reasons.count < best!.reasons.count {
                best = NearMatch(requirement: requirement, reasons: reasons)
            }
        }
        return best
    }

    /// How `method` differs from `requirement`, when it is near it: empty for its witness,
    /// nil when unrelated.
    static func differences(_ method: ParsedMethod, _ requirement: DelegateRequirement) -> [String]? {
        let m = method.signature, r = requirement.signature
        var reasons: [String] = []
        // Which parameters line up: all of them, or all but the first when the first label
        // moved into the base name (`peripheralManagerIsReadyToUpdateSubscribers(_:)` for
        // `peripheralManagerIsReady(toUpdateSubscribers:)`).
        var skipFirst = false
        if m.baseName != r.baseName {
            let mJoined = joinedNames(m), rJoined = joinedNames(r)
            if !mJoined.isDisjoint(with: rJoined), !m.labels.isEmpty, !r.labels.isEmpty {
                skipFirst = true
                reasons.append("Swift's name is `\(r.name)`, not the Objective-C-style `\(m.name)`")
            } else if m.baseName.count >= 12, levenshtein(m.baseName, r.baseName) <= 2 {
                reasons.append("name `\(m.baseName)` should be `\(r.baseName)`")
            } else {
                return nil
            }
        }
        let start = skipFirst ? 1 : 0
        if m.labels.count == r.labels.count {
            for i in start..<m.labels.count {
                switch compareLabel(method, i, requirement) {
                case .exact: break
                case .near(let why): reasons.append(why)
                case .unrelated: return nil
                }
            }
            for i in 0..<m.types.count where m.types[i] != r.types[i] {
                reasons.append(typeDifference(written: method.writtenTypes[i], m.types[i], r.types[i],
                                              name: requirement.parameterNames[i]))
            }
        } else if abs(m.labels.count - r.labels.count) == 1, !skipFirst {
            guard let why = oneParameterApart(method, requirement) else { return nil }
            reasons.append(why)
        } else {
            return nil
        }
        if let effects = method.effects { reasons.append("a delegate method cannot be `\(effects)`") }
        return reasons
    }

    /// The base name with the first label folded in (`peripheralIsReadyToSendWriteWithoutResponse`),
    /// and without it, lowercased: what an Objective-C selector or a Swift 2 name reads as.
    private static func joinedNames(_ signature: MethodSignature) -> Set<String> {
        var names: Set<String> = [signature.baseName.lowercased()]
        if let first = signature.labels.first, first != "_" {
            names.insert((signature.baseName + first).lowercased())
        }
        return names
    }

    enum LabelMatch: Equatable {
        case exact
        case near(String)
        case unrelated
    }

    static func compareLabel(_ method: ParsedMethod, _ i: Int, _ requirement: DelegateRequirement) -> LabelMatch {
        let written = method.signature.labels[i], wanted = requirement.signature.labels[i]
        let sameType = method.signature.types[i] == requirement.signature.types[i]
        if written == wanted { return .exact }
        if written.lowercased() == wanted.lowercased() { return .near("label `\(written)` should be `\(wanted)`") }
        if wanted == "_" {
            // Swift 2 style: the first parameter named, as `central:`.
            guard sameType || written == requirement.parameterNames[i] else { return .unrelated }
            return .near("`\(written):` should have no label: `_ \(requirement.parameterNames[i]):`")
        }
        if written == "_" {
            return sameType ? .near("missing label `\(wanted):`") : .unrelated
        }
        // Objective-C style: the parameter's type folded into the label
        // (`didUpdateValueForCharacteristic` for `didUpdateValueFor`), or the other way round.
        let typeWord = requirement.signature.types[i].filter { $0.isLetter || $0.isNumber }.lowercased()
        let (long, short) = written.count > wanted.count ? (written, wanted) : (wanted, written)
        if long.lowercased().hasPrefix(short.lowercased()) {
            var rest = long.dropFirst(short.count).lowercased()
            if rest.hasSuffix("s") && !typeWord.hasSuffix(rest) { rest.removeLast() }
            if rest.count >= 3, typeWord.hasSuffix(rest) {
                return .near("Objective-C-style label `\(written)`: Swift's is `\(wanted)`")
            }
        }
        if levenshtein(written.lowercased(), wanted.lowercased()) <= max(1, min(written.count, wanted.count) / 6) {
            return .near("label `\(written)` should be `\(wanted)`")
        }
        return .unrelated
    }

    /// One parameter missing or extra, the others' labels the same.
    private static func oneParameterApart(_ method: ParsedMethod, _ requirement: DelegateRequirement) -> String? {
        let m = method.signature, r = requirement.signature
        let methodIsLonger = m.labels.count > r.labels.count
        let (long, short) = methodIsLonger ? (m.labels, r.labels) : (r.labels, m.labels)
        guard short.contains(where: { $0 != "_" }) else { return nil }
        for k in long.indices {
            var rest = long
            rest.remove(at: k)
            guard rest == short else { continue }
            if methodIsLonger {
                return "extra parameter `\(m.labels[k]): \(method.writtenTypes[k])`"
            }
            let name = requirement.parameterNames[k]
            let label = r.labels[k] == name ? name : "\(r.labels[k]) \(name)"
            return "missing parameter `\(label): \(r.types[k])`"
        }
        return nil
    }

    private static func typeDifference(written: String, _ have: String, _ want: String, name: String) -> String {
        if have.hasPrefix("NSError") && want.hasPrefix("Error") {
            return "`\(written)` should be `\(want)`: a method taking `NSError?` is a different method in Swift"
        }
        return "parameter `\(name)` is `\(written)`, should be `\(want)`"
    }

    /// Edit distance between two strings.
    static func levenshtein(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}

/// A path the lint could not read.
public struct LintError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
