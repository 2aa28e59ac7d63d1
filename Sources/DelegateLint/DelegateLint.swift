import SwiftParser
import SwiftSyntax
