import SwiftParser
import SwiftSyntax

/// The types of a set of source files: what each inherits or conforms to and the methods it
/// declares, its extensions' merged in.
struct SourceIndex {
    struct TypeInfo {
        /// Qualified by the types it is nested in: `Outer.Inner`.
        var name: String
        var kind: Kind
        /// The names in its inheritance clauses and its extensions' (last components:
        /// `CoreBluetooth.CBPeripheralDelegate` is `CBPeripheralDelegate`).
        var inherited: [String] = []
        /// Where the names in `inherited` are looked up (the type's enclosing types).
        var scope: [String] = []
        /// Its methods: in the body first, then in extensions.
        var methods: [Method] = []
    }

    enum Kind { case classType, structType, enumType, actorType, protocolType, unknown }

    struct Method {
        var parsed: ParsedMethod
        /// Declared in the type's body rather than in an extension: only such a method of a
        /// class can be overridden (Swift on Linux has no `@objc` dynamic dispatch).
        var inBody: Bool
    }

    private(set) var types: [String: TypeInfo] = [:]
    /// Type names by their last component, to resolve names used from another scope.
    private var byShortName: [String: [String]] = [:]

    mutating func add(source: String, file: String) {
        let tree = Parser.parse(source: source)
        let converter = SourceLocationConverter(fileName: file, tree: tree)
        let collector = Collector(file: file, converter: converter)
        collector.walk(tree)
        for found in collector.found {
            var info = types[found.name] ?? TypeInfo(name: found.name, kind: found.kind)
            if found.kind != .unknown { info.kind = found.kind }
            if !found.isExtension { info.scope = found.scope }
            info.inherited += found.inherited
            let methods = found.methods.map { Method(parsed: $0, inBody: !found.isExtension) }
            // Body methods first, whichever file was read first.
            info.methods = found.isExtension ? info.methods + methods : methods + info.methods
            if types[found.name] == nil {
                byShortName[found.name.split(separator: ".").last.map(String.init) ?? found.name, default: []].append(found.name)
            }
            types[found.name] = info
        }
    }

    /// The type `name` refers to from within `scope`: nested names from the innermost scope
    /// out, then a unique type of that last name anywhere.
    func resolve(_ name: String, from scope: [String]) -> TypeInfo? {
        for depth in stride(from: scope.count, through: 0, by: -1) {
            let candidate = (scope.prefix(depth) + [name]).joined(separator: ".")
            if let info = types[candidate] { return info }
        }
        let short = name.split(separator: ".").last.map(String.init) ?? name
        if let names = byShortName[short], names.count == 1 { return types[names[0]] }
        return nil
    }

    /// The class a class inherits from, if it is among the sources.
    func superclass(of type: TypeInfo) -> TypeInfo? {
        guard type.kind == .classType else { return nil }
        for name in type.inherited {
            if let info = resolve(name, from: type.scope), info.kind == .classType, info.name != type.name { return info }
        }
        return nil
    }

    /// The delegate protocols `type` itself declares conformance to, directly or through a
    /// protocol of the sources that refines one.
    func declaredDelegateProtocols(of type: TypeInfo) -> Set<String> {
        var result: Set<String> = []
        var seen: Set<String> = []
        var pending = type.inherited.map { ($0, type.scope) }
        while let (name, scope) = pending.popLast() {
            if DelegateRequirement.protocolNames.contains(name) {
                result.insert(name)
            } else if let info = resolve(name, from: scope), info.kind == .protocolType, seen.insert(info.name).inserted {
                pending += info.inherited.map { ($0, info.scope) }
            }
        }
        return result
    }

    /// Walks one file, collecting each type declaration and extension.
    private final class Collector: SyntaxVisitor {
        struct Found {
            var name: String
            var kind: Kind
            var isExtension: Bool
            var scope: [String]
            var inherited: [String]
            var methods: [ParsedMethod]
        }

        let file: String
        let converter: SourceLocationConverter
        var found: [Found] = []
        private var scope: [String] = []

        init(file: String, converter: SourceLocationConverter) {
            self.file = file
            self.converter = converter
            super.init(viewMode: .sourceAccurate)
        }

        override func visit(_ node: ClassDeclSyntax) -> SyntaxVisitorContinueKind {
            enter(node.name.text, .classType, node.inheritanceClause, node.memberBlock)
        }
        override func visitPost(_ node: ClassDeclSyntax) { scope.removeLast() }
        override func visit(_ node: StructDeclSyntax) -> SyntaxVisitorContinueKind {
            enter(node.name.text, .structType, node.inheritanceClause, node.memberBlock)
        }
        override func visitPost(_ node: StructDeclSyntax) { scope.removeLast() }
        override func visit(_ node: EnumDeclSyntax) -> SyntaxVisitorContinueKind {
            enter(node.name.text, .enumType, node.inheritanceClause, node.memberBlock)
        }
        override func visitPost(_ node: EnumDeclSyntax) { scope.removeLast() }
        override func visit(_ node: ActorDeclSyntax) -> SyntaxVisitorContinueKind {
            enter(node.name.text, .actorType, node.inheritanceClause, node.memberBlock)
        }
        override func visitPost(_ node: ActorDeclSyntax) { scope.removeLast() }
        override func visit(_ node: ProtocolDeclSyntax) -> SyntaxVisitorContinueKind {
            enter(node.name.text, .protocolType, node.inheritanceClause, node.memberBlock)
        }
        override func visitPost(_ node: ProtocolDeclSyntax) { scope.removeLast() }

        override func visit(_ node: ExtensionDeclSyntax) -> SyntaxVisitorContinueKind {
            let name = TypeNormalizer.normalize(node.extendedType)
            found.append(Found(name: name, kind: .unknown, isExtension: true, scope: [],
                               inherited: Self.names(node.inheritanceClause), methods: methods(node.memberBlock)))
            // Types nested in the extension are nested in the extended type.
            scope.append(name)
            return .visitChildren
        }
        override func visitPost(_ node: ExtensionDeclSyntax) { scope.removeLast() }

        // Local types in function bodies are out of reach of delegates set elsewhere, and
        // would only confuse scopes: not visited.
        override func visit(_ node: CodeBlockSyntax) -> SyntaxVisitorContinueKind { .skipChildren }
        override func visit(_ node: AccessorBlockSyntax) -> SyntaxVisitorContinueKind { .skipChildren }

        private func enter(_ name: String, _ kind: Kind, _ inheritance: InheritanceClauseSyntax?,
                           _ members: MemberBlockSyntax) -> SyntaxVisitorContinueKind {
            let qualified = (scope + [name.trimmingBackticks]).joined(separator: ".")
            found.append(Found(name: qualified, kind: kind, isExtension: false, scope: scope,
                               inherited: Self.names(inheritance), methods: methods(members)))
            scope.append(name.trimmingBackticks)
            return .visitChildren
        }

        private func methods(_ members: MemberBlockSyntax) -> [ParsedMethod] {
            members.members.compactMap { member in
                member.decl.as(FunctionDeclSyntax.self).map { ParsedMethod($0, converter: converter, file: file) }
            }
        }

        /// The protocol and class names of an inheritance clause (`@unchecked Sendable` and
        /// the like are not names the lint needs).
        static func names(_ clause: InheritanceClauseSyntax?) -> [String] {
            guard let clause else { return [] }
            var result: [String] = []
            func add(_ type: TypeSyntax) {
                if let identifier = type.as(IdentifierTypeSyntax.self) {
                    result.append(identifier.name.text)
                } else if let member = type.as(MemberTypeSyntax.self) {
                    result.append(member.name.text)
                } else if let composition = type.as(CompositionTypeSyntax.self) {
                    for element in composition.elements { add(element.type) }
                }
            }
            for inherited in clause.inheritedTypes { add(inherited.type) }
            return result
        }
    }
}
