import SwiftSyntax

/// A method's Swift name and parameter types, normalized so that two spellings of one type
/// (`any Error` and `Error`, `Optional<Error>` and `Error?`, `CFAbsoluteTime` and `Double`)
/// compare equal: what decides whether a method witnesses a requirement.
public struct MethodSignature: Hashable, Sendable, CustomStringConvertible {
    public var baseName: String
    /// Argument labels, `_` for none.
    public var labels: [String]
    /// Normalized parameter types.
    public var types: [String]

    /// `centralManager(_:didConnect:)`.
    public var name: String { "\(baseName)(\(labels.map { "\($0):" }.joined()))" }
    public var description: String { name }
}

/// A function declaration as the lint sees it.
struct ParsedMethod {
    var signature: MethodSignature
    /// Parameter names inside the body (`RSSI` in `rssi RSSI: NSNumber`).
    var parameterNames: [String]
    /// Parameter types as written (for messages).
    var writtenTypes: [String]
    /// `async`, `throws`: a witness of a plain requirement has none.
    var effects: String?
    var returnsValue: Bool
    var isStatic: Bool
    var isGeneric: Bool
    var isOverride: Bool
    /// The declaration without its body, on one line.
    var declaration: String
    /// Where its name is.
    var location: Location

    struct Location: Hashable, Sendable {
        var file: String
        var line: Int
        var column: Int
    }

    init(_ decl: FunctionDeclSyntax, converter: SourceLocationConverter, file: String) {
        let parameters = Array(decl.signature.parameterClause.parameters)
        signature = MethodSignature(
            baseName: decl.name.text.trimmingBackticks,
            labels: parameters.map { $0.firstName.text.trimmingBackticks },
            types: parameters.map { TypeNormalizer.normalize($0.type) })
        parameterNames = parameters.map { ($0.secondName ?? $0.firstName).text.trimmingBackticks }
        writtenTypes = parameters.map { $0.type.trimmedDescription.collapsingWhitespace }
        let effectText = decl.signature.effectSpecifiers?.trimmedDescription ?? ""
        effects = effectText.isEmpty ? nil : effectText
        if let returned = decl.signature.returnClause?.type {
            returnsValue = !["Void", "()", "Swift.Void"].contains(returned.trimmedDescription)
        } else {
            returnsValue = false
        }
        let modifiers = decl.modifiers.map(\.name.text)
        isStatic = modifiers.contains("static") || modifiers.contains("class")
        isOverride = modifiers.contains("override")
        isGeneric = decl.genericParameterClause != nil
        var header = decl
        header.body = nil
        header.attributes = []
        header.modifiers = []
        declaration = header.trimmedDescription.collapsingWhitespace
        let position = converter.location(for: decl.name.positionAfterSkippingLeadingTrivia)
        location = Location(file: file, line: position.line, column: position.column)
    }
}

/// Spells a type one way, so that spellings the compiler treats as the same type compare equal.
enum TypeNormalizer {
    /// Modules whose names may prefix a type without changing it.
    static let modules: Set<String> = ["Swift", "Foundation", "CoreBluetooth", "Dispatch", "ObjectiveC"]
    /// Typealiases the delegate protocols use, by the type they name.
    static let aliases: [String: String] = [
        "CFAbsoluteTime": "Double", "TimeInterval": "Double", "CBL2CAPPSM": "UInt16", "Void": "()",
    ]

    static func normalize(_ type: TypeSyntax) -> String {
        if let attributed = type.as(AttributedTypeSyntax.self) {
            // `@escaping`, `@Sendable` don't change which requirement matches; `inout` does.
            let specifiers = attributed.specifiers.map(\.trimmedDescription).filter { $0 == "inout" }
            return (specifiers.map { "\($0) " }.joined()) + normalize(attributed.baseType)
        }
        if let some = type.as(SomeOrAnyTypeSyntax.self) { return normalize(some.constraint) }
        if let optional = type.as(OptionalTypeSyntax.self) { return normalize(optional.wrappedType) + "?" }
        // An implicitly unwrapped optional is an Optional to the type checker.
        if let unwrapped = type.as(ImplicitlyUnwrappedOptionalTypeSyntax.self) {
            return normalize(unwrapped.wrappedType) + "?"
        }
        if let array = type.as(ArrayTypeSyntax.self) { return "[\(normalize(array.element))]" }
        if let dictionary = type.as(DictionaryTypeSyntax.self) {
            return "[\(normalize(dictionary.key)): \(normalize(dictionary.value))]"
        }
        if let tuple = type.as(TupleTypeSyntax.self) {
            if tuple.elements.count == 1, let only = tuple.elements.first, only.firstName == nil {
                return normalize(only.type)
            }
            return "(" + tuple.elements.map { normalize($0.type) }.joined(separator: ", ") + ")"
        }
        if let member = type.as(MemberTypeSyntax.self) {
            if let base = member.baseType.as(IdentifierTypeSyntax.self), modules.contains(base.name.text) {
                return named(member.name.text, member.genericArgumentClause)
            }
            return normalize(member.baseType) + "." + named(member.name.text, member.genericArgumentClause)
        }
        if let identifier = type.as(IdentifierTypeSyntax.self) {
            return named(identifier.name.text, identifier.genericArgumentClause)
        }
        return type.trimmedDescription.collapsingWhitespace
    }

    private static func named(_ name: String, _ generics: GenericArgumentClauseSyntax?) -> String {
        guard let generics else { return aliases[name] ?? name }
        let arguments: [String] = generics.arguments.map { argument in
            switch argument.argument {
            case .type(let type): normalize(type)
            case .expr(let expression): expression.trimmedDescription.collapsingWhitespace
            }
        }
        switch (name, arguments.count) {
        case ("Optional", 1), ("ImplicitlyUnwrappedOptional", 1): return arguments[0] + "?"
        case ("Array", 1): return "[\(arguments[0])]"
        case ("Dictionary", 2): return "[\(arguments[0]): \(arguments[1])]"
        default: return "\(name)<\(arguments.joined(separator: ", "))>"
        }
    }
}

extension String {
    /// Runs of spaces and newlines as one space, and none just inside brackets and parentheses
    /// (a declaration broken over lines reads as one line).
    var collapsingWhitespace: String {
        var result = ""
        var pendingSpace = false
        for character in self {
            if character.isWhitespace {
                pendingSpace = !result.isEmpty
                continue
            }
            if pendingSpace, !"([".contains(result.last ?? " "), !")],:".contains(character) {
                result.append(" ")
            }
            pendingSpace = false
            result.append(character)
        }
        return result
    }

    var trimmingBackticks: String {
        hasPrefix("`") && hasSuffix("`") && count >= 2 ? String(dropFirst().dropLast()) : self
    }
}
